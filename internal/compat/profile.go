package compat

import (
	"fmt"
	"strings"
)

// Profile is one RabbitMQ release series whose AMQP 0-9-1 behaviour Warren
// copies. Every way the series differ is a field here, so the table below
// (profiles) is the whole list, and code asks the profile a question
// (p.QuorumDeliveryLimit) instead of comparing version numbers.
type Profile struct {
	// Name is the series as Options.RabbitMQVersion spells it: "4.1".
	Name string
	// Version is the release reported to clients: connection.start's
	// server property "version" and /api/overview's rabbitmq_version.
	Version string

	// MaxMessageSize is the largest message body accepted when the
	// embedder sets none: 128 MiB in 3.13, 16 MiB from 4.0
	// (rabbitmq-server#11455, "Reduce default maximum message size to
	// 16MB"; 4.0.0 release notes).
	MaxMessageSize int

	// FrameMinSize is the smallest frame_max a client may choose in
	// connection.tune-ok, and the largest frame RabbitMQ reads before it:
	// 4096 up to 4.0, 8192 from 4.1 (rabbitmq-server#13542; 4.1.0 release
	// notes, "Initial AMQP 0-9-1 Maximum Frame Size"). Warren reads frames
	// up to its own frame-max before tune-ok in every profile, so a
	// start-ok any of them accepts is accepted.
	FrameMinSize uint32

	// QuorumDeliveryLimit is a quorum queue's delivery limit when neither
	// its x-delivery-limit argument nor a policy sets one: -1 (none) in
	// 3.13, 20 from 4.0 (rabbit_quorum_queue ?DEFAULT_DELIVERY_LIMIT;
	// quorum-queues guide, "Starting with RabbitMQ 4.0, the delivery limit
	// for quorum queues defaults to 20").
	QuorumDeliveryLimit int64
	// NegativeDeliveryLimit accepts a negative x-delivery-limit as
	// "unlimited" (4.0 and later: "restored by setting x-delivery-limit=-1");
	// 3.13 refuses a negative value with 406.
	NegativeDeliveryLimit bool
	// FailedDeliveryCount counts only failed deliveries towards the
	// delivery limit and x-delivery-count (basic.reject with requeue and a
	// channel or connection lost with the message unacknowledged; not
	// basic.nack), and adds x-acquired-count, the number of all
	// deliveries: 4.3 (quorum-queues guide, "When is delivery count
	// incremented?").
	FailedDeliveryCount bool
	// QuorumPriorities is how a quorum queue orders messages by priority.
	QuorumPriorities Priorities
	// QuorumConsumerTimeoutCancel makes a quorum queue's consumer timeout
	// cancel the consumer with basic.cancel when the client announced
	// consumer_cancel_notify (the channel is closed otherwise), and makes
	// x-consumer-timeout an argument compared on redeclaration: 4.3
	// (quorum-queues guide, "Consumer Timeout").
	QuorumConsumerTimeoutCancel bool
	// ClassicConsumerTimeout applies the consumer timeout to classic
	// queues: up to 4.2. RabbitMQ 4.3 moved the timeout into the queue
	// types and classic queues do not implement it
	// (rabbitmq-server#16983).
	ClassicConsumerTimeout bool
	// DelayedRetry accepts x-delayed-retry-type, -min and -max on quorum
	// queues: a returned message is held for min(min × count, max) before
	// it is ready again (4.3, quorum-queues guide, "Delayed Retry").
	DelayedRetry bool

	// ClientDeathInterpreted counts a client-published x-death header in
	// the next dead-lettering, as 3.13.3 and later 3.13 releases do
	// (rabbitmq-server#11339); from 4.0 x-headers belong to the broker.
	ClientDeathInterpreted bool

	// RefuseTransientNonExclusive closes the connection with 541 when a
	// queue is declared neither durable nor exclusive: the deprecated
	// feature transient_nonexcl_queues is denied by default from 4.3.
	RefuseTransientNonExclusive bool
	// RefuseQueueMode refuses x-queue-mode (any value) and
	// x-queue-version=1 with 406: CQv1 is removed in 4.3.
	RefuseQueueMode bool
	// GlobalQoSPerConsumer treats basic.qos with global=true as
	// global=false (the deprecated feature global_qos is denied by default
	// from 4.3: the request is answered qos-ok and the limit applies per
	// consumer).
	GlobalQoSPerConsumer bool

	// ReplyToMandatoryRouted counts a mandatory publish to a direct
	// reply-to name as routed without checking that the requester is
	// still there: 4.2 (4.2.0 release notes, "Mandatory flag in Direct
	// Reply-To").
	ReplyToMandatoryRouted bool
}

// Priorities is how a quorum queue treats message priorities.
type Priorities uint8

const (
	// NoPriorities: messages are served in order, priority ignored (3.13).
	NoPriorities Priorities = iota
	// TwoLevels: priority 5 and above is high, anything else (none
	// included) normal; high messages are served two for every normal
	// one (4.0 to 4.2, quorum-queues guide, "Priorities").
	TwoLevels
	// StrictLevels: 32 levels 0-31, higher always first, priorities above
	// 31 counted as 31, x-max-priority not needed; a returned message
	// loses its priority (4.3, quorum-queues guide, "Message Priorities").
	StrictLevels
)

// profiles is the table: one entry per supported series, oldest first.
var profiles = []Profile{
	{
		Name: "3.13", Version: "3.13.7",
		MaxMessageSize: 128 << 20, FrameMinSize: 4096,
		QuorumDeliveryLimit: -1, QuorumPriorities: NoPriorities,
		ClientDeathInterpreted: true,
		ClassicConsumerTimeout: true,
	},
	{
		Name: "4.0", Version: "4.0.0",
		MaxMessageSize: 16 << 20, FrameMinSize: 4096,
		QuorumDeliveryLimit: 20, NegativeDeliveryLimit: true, QuorumPriorities: TwoLevels,
		ClassicConsumerTimeout: true,
	},
	{
		Name: "4.1", Version: "4.1.0",
		MaxMessageSize: 16 << 20, FrameMinSize: 8192,
		QuorumDeliveryLimit: 20, NegativeDeliveryLimit: true, QuorumPriorities: TwoLevels,
		ClassicConsumerTimeout: true,
	},
	{
		Name: "4.2", Version: "4.2.0",
		MaxMessageSize: 16 << 20, FrameMinSize: 8192,
		QuorumDeliveryLimit: 20, NegativeDeliveryLimit: true, QuorumPriorities: TwoLevels,
		ClassicConsumerTimeout: true,
		ReplyToMandatoryRouted: true,
	},
	{
		Name: "4.3", Version: "4.3.0",
		MaxMessageSize: 16 << 20, FrameMinSize: 8192,
		QuorumDeliveryLimit: 20, NegativeDeliveryLimit: true, QuorumPriorities: StrictLevels,
		FailedDeliveryCount: true, QuorumConsumerTimeoutCancel: true, DelayedRetry: true,
		RefuseTransientNonExclusive: true, RefuseQueueMode: true, GlobalQoSPerConsumer: true,
		ReplyToMandatoryRouted: true,
	},
}

// DefaultName is the series used when none is chosen. 3.13 is the most
// permissive: code written against any RabbitMQ 3.x or 4.x runs
// unchanged (no default delivery limit drops poison messages, 128 MiB
// messages pass, transient queues and global QoS work), and it is the
// closest to what Warren copied before profiles existed. The stricter 4.x
// profiles are opt-in, for teams that want their tests to see what their
// production RabbitMQ answers.
const DefaultName = "3.13"

// Names lists the supported series, oldest first.
func Names() []string {
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.Name
	}
	return names
}

// Parse returns the profile of a series: "3.13", "4.0", "4.1", "4.2" or
// "4.3". A patch release ("4.1.2") selects its series; "" selects
// DefaultName.
func Parse(s string) (Profile, error) {
	name := strings.TrimSpace(s)
	if name == "" {
		name = DefaultName
	}
	// A patch release: cut at the second dot (no allocation: the broker
	// parses its option on hot paths such as the unacked scan).
	if i := strings.IndexByte(name, '.'); i >= 0 {
		if j := strings.IndexByte(name[i+1:], '.'); j >= 0 && strings.Count(name, ".") == 2 {
			name = name[:i+1+j]
		}
	}
	for _, p := range profiles {
		if p.Name == name {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("compat: unknown RabbitMQ version %q (supported: %s)", s, strings.Join(Names(), ", "))
}

// Default returns the profile of DefaultName.
func Default() Profile {
	p, _ := Parse("")
	return p
}

// OrDefault returns p, or the default profile when p is the zero Profile
// (a Config nobody set).
func (p Profile) OrDefault() Profile {
	if p.Name == "" {
		return Default()
	}
	return p
}

// DeniedFeatureText is RabbitMQ's refusal of a deprecated feature denied
// by default (rabbit_deprecated_features, phase denied_by_default), as a
// client reads it: cut, with "...", to fit the 255-byte reply text after
// the "INTERNAL_ERROR - " prefix, as the broker cuts it.
func DeniedFeatureText(feature string) string {
	text := "Feature `" + feature + "` is deprecated.\n" +
		"By default, this feature is not permitted anymore.\n" +
		"The feature will be removed from a future major RabbitMQ version, regardless of the configuration; actual version to be determined.\n" +
		"To continue using this feature when it is not permitted by default, set the following parameter in your configuration:\n" +
		"    \"deprecated_features.permit." + feature + " = true\""
	const room = 255 - len("INTERNAL_ERROR - ")
	if len(text) > room {
		text = text[:room-3] + "..."
	}
	return text
}
