package compat

import (
	"fmt"
	"strings"
)

// Profile is one RabbitMQ release whose AMQP 0-9-1 behaviour Warren
// copies. Every way the releases differ is a field here, so the tables
// below (series and patches) are the whole list, and code asks the
// profile a question (p.QuorumDeliveryLimit) instead of comparing version
// numbers.
type Profile struct {
	// Name is the series as Options.RabbitMQVersion spells it: "4.1".
	Name string
	// Version is the release reported to clients: connection.start's
	// server property "version" and /api/overview's rabbitmq_version.
	// It is the release asked for ("4.3.4"), or the series' newest
	// release the tables know when only the series was named.
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
	// consumer_cancel_notify (the channel is closed otherwise): 4.3
	// (quorum-queues guide, "Consumer Timeout").
	QuorumConsumerTimeoutCancel bool
	// ClassicConsumerTimeout applies the consumer timeout to classic
	// queues: up to 4.2. RabbitMQ 4.3 moved the timeout into the queue
	// types and classic queues do not implement it
	// (rabbitmq-server#16983).
	ClassicConsumerTimeout bool
	// ConsumerTimeoutArgs is which queues take x-consumer-timeout as a
	// queue or basic.consume argument, and how strictly.
	ConsumerTimeoutArgs TimeoutArgs
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
	// PassiveDeclare is the permission a passive queue.declare or
	// exchange.declare needs on the entity it names.
	PassiveDeclare PassivePermission

	// ReplyToMandatoryRouted counts a mandatory publish to a direct
	// reply-to name as routed without checking that the requester is
	// still there: 4.2 (4.2.0 release notes, "Mandatory flag in Direct
	// Reply-To").
	ReplyToMandatoryRouted bool

	// LocalRandomExchange serves the x-local-random exchange type, which
	// routes each message to one of the classic queues bound to it that
	// are local to the publisher's node: 4.0
	// (rabbit_exchange_type_local_random); 3.13 refuses the type as
	// unknown.
	LocalRandomExchange bool
	// TopicHashWildcards is the most '#' words a topic exchange's binding
	// key may hold, 0 for no limit: 2 from 4.3.5 (rabbitmq-server#17039,
	// rabbit_exchange_type_topic:validate_binding).
	TopicHashWildcards int

	// ExportExclusiveBindings puts the bindings to exclusive queues in a
	// definitions export, though the queues themselves are left out: the
	// streamed export of 4.2.9 and 4.3.3 to 4.4.0 (rabbitmq-server#16734
	// folds every explicit binding); earlier releases exported only the
	// bindings of exported queues, and 4.4.1 does again
	// (rabbitmq-server#17838).
	ExportExclusiveBindings bool
	// ImportSkipsReservedBindings makes a definitions import skip, with a
	// warning, the bindings whose destination is a queue named "amq.*"
	// instead of failing on them: 4.4.1 (rabbitmq-server#17838, #17841).
	ImportSkipsReservedBindings bool
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

// TimeoutArgs is where x-consumer-timeout is an argument RabbitMQ checks
// (the queue types' capabilities: rabbit_amqqueue's
// check_declare_arguments and check_consume_arguments refuse an argument
// that another queue type lists and this one does not).
type TimeoutArgs uint8

const (
	// TimeoutArgsAnywhere: a queue or consumer argument of any queue,
	// never compared on redeclare; a value that is not an integer is
	// ignored (3.12 to 4.2).
	TimeoutArgsAnywhere TimeoutArgs = iota
	// TimeoutArgsQuorumConsumers: a basic.consume argument of quorum
	// queues only (406 on a classic queue or a stream); as a queue
	// argument still accepted anywhere and not compared (4.3.0, 4.3.1).
	TimeoutArgsQuorumConsumers
	// TimeoutArgsQuorum: a queue and basic.consume argument of quorum
	// queues only, a non-negative integer, compared on redeclare; 406 on
	// a classic queue or a stream (4.3.2 and later,
	// rabbitmq-server#16557).
	TimeoutArgsQuorum
)

// PassivePermission is the permission a passive declare needs.
type PassivePermission uint8

const (
	// PassiveNone: any user with access to the vhost (3.13 to 4.2.5).
	PassiveNone PassivePermission = iota
	// PassiveConfigure: configure on the entity, as a declare (4.2.6 and
	// 4.3.0, rabbitmq-server#16085).
	PassiveConfigure
	// PassiveAny: configure, write or read on the entity; a user with none
	// is refused as for configure (4.2.7 and 4.3.1 and later,
	// rabbitmq-server#16272).
	PassiveAny
)

// series is the first table: one entry per supported series, oldest
// first, with every answer of its first release the tables know.
var series = []Profile{
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
		LocalRandomExchange:    true,
	},
	{
		Name: "4.1", Version: "4.1.0",
		MaxMessageSize: 16 << 20, FrameMinSize: 8192,
		QuorumDeliveryLimit: 20, NegativeDeliveryLimit: true, QuorumPriorities: TwoLevels,
		ClassicConsumerTimeout: true,
		LocalRandomExchange:    true,
	},
	{
		Name: "4.2", Version: "4.2.0",
		MaxMessageSize: 16 << 20, FrameMinSize: 8192,
		QuorumDeliveryLimit: 20, NegativeDeliveryLimit: true, QuorumPriorities: TwoLevels,
		ClassicConsumerTimeout: true,
		ReplyToMandatoryRouted: true,
		LocalRandomExchange:    true,
	},
	{
		Name: "4.3", Version: "4.3.0",
		MaxMessageSize: 16 << 20, FrameMinSize: 8192,
		QuorumDeliveryLimit: 20, NegativeDeliveryLimit: true, QuorumPriorities: StrictLevels,
		FailedDeliveryCount: true, QuorumConsumerTimeoutCancel: true, DelayedRetry: true,
		ConsumerTimeoutArgs:         TimeoutArgsQuorumConsumers,
		RefuseTransientNonExclusive: true, RefuseQueueMode: true, GlobalQoSPerConsumer: true,
		PassiveDeclare:         PassiveConfigure,
		ReplyToMandatoryRouted: true,
		LocalRandomExchange:    true,
	},
	{
		// 4.4.0 keeps 4.3.5's answers: its release notes list nothing
		// else an AMQP 0-9-1 client sees (the x-amqp-1.0-* headers and
		// x-basic-* annotations it stops parsing are read only when a
		// message is converted to AMQP 1.0, which Warren never does).
		Name: "4.4", Version: "4.4.0",
		MaxMessageSize: 16 << 20, FrameMinSize: 8192,
		QuorumDeliveryLimit: 20, NegativeDeliveryLimit: true, QuorumPriorities: StrictLevels,
		FailedDeliveryCount: true, QuorumConsumerTimeoutCancel: true, DelayedRetry: true,
		ConsumerTimeoutArgs:         TimeoutArgsQuorum,
		RefuseTransientNonExclusive: true, RefuseQueueMode: true, GlobalQoSPerConsumer: true,
		PassiveDeclare:          PassiveAny,
		ReplyToMandatoryRouted:  true,
		LocalRandomExchange:     true,
		TopicHashWildcards:      2,
		ExportExclusiveBindings: true,
	},
}

// patches is the second table: the patch releases that changed an answer
// of their series, oldest first, each with what it changed. A release's
// profile is its series' entry with every patch of the series up to it
// applied.
var patches = []struct {
	version string
	change  func(*Profile)
}{
	{"4.2.6", func(p *Profile) { p.PassiveDeclare = PassiveConfigure }},
	{"4.2.7", func(p *Profile) { p.PassiveDeclare = PassiveAny }},
	{"4.2.9", func(p *Profile) { p.ExportExclusiveBindings = true }},
	{"4.3.1", func(p *Profile) { p.PassiveDeclare = PassiveAny }},
	{"4.3.2", func(p *Profile) { p.ConsumerTimeoutArgs = TimeoutArgsQuorum }},
	{"4.3.3", func(p *Profile) { p.ExportExclusiveBindings = true }},
	{"4.3.5", func(p *Profile) { p.TopicHashWildcards = 2 }},
	{"4.4.1", func(p *Profile) {
		p.ExportExclusiveBindings = false
		p.ImportSkipsReservedBindings = true
	}},
}

// releases is every profile the tables give, oldest first: each series'
// first release, then one per patch of it.
var releases = buildReleases()

func buildReleases() []Profile {
	var out []Profile
	for _, s := range series {
		p := s
		out = append(out, p)
		for _, patch := range patches {
			if seriesOf(patch.version) != s.Name {
				continue
			}
			patch.change(&p)
			p.Version = patch.version
			out = append(out, p)
		}
	}
	return out
}

// seriesOf cuts a release ("4.3.2") to its series ("4.3").
func seriesOf(release string) string {
	return release[:strings.LastIndexByte(release, '.')]
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
	names := make([]string, len(series))
	for i, p := range series {
		names[i] = p.Name
	}
	return names
}

// Releases lists the releases whose answers differ from the release
// before them in their series, oldest first: every distinct profile.
func Releases() []string {
	out := make([]string, len(releases))
	for i, p := range releases {
		out[i] = p.Version
	}
	return out
}

// Parse returns the profile of a series ("3.13", "4.0" to "4.4": its
// newest release the tables know) or of a release of one ("4.3.2": the
// answers of 4.3.2, reported as 4.3.2; a release older than its series'
// first entry gets that entry, a newer one than the tables know the
// newest). "" selects DefaultName.
func Parse(s string) (Profile, error) {
	name := strings.TrimSpace(s)
	if name == "" {
		name = DefaultName
	}
	// No allocation: the broker parses its option on hot paths such as
	// the unacked scan.
	seriesName, patch, isRelease := name, 0, false
	if i := strings.IndexByte(name, '.'); i >= 0 {
		if j := strings.IndexByte(name[i+1:], '.'); j >= 0 {
			n, ok := decimal(name[i+2+j:])
			if !ok {
				return Profile{}, unknown(s)
			}
			seriesName, patch, isRelease = name[:i+1+j], n, true
		}
	}
	found := false
	var p Profile
	for _, r := range releases {
		if r.Name != seriesName {
			continue
		}
		if !found || !isRelease || releasePatch(r.Version) <= patch {
			p, found = r, true
		}
	}
	if !found {
		return Profile{}, unknown(s)
	}
	if isRelease {
		p.Version = name
	}
	return p, nil
}

// releasePatch is the patch number of a release the tables name.
func releasePatch(release string) int {
	n, _ := decimal(release[strings.LastIndexByte(release, '.')+1:])
	return n
}

// decimal parses a patch number: 1 to 4 decimal digits.
func decimal(s string) (int, bool) {
	if len(s) == 0 || len(s) > 4 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func unknown(s string) error {
	return fmt.Errorf("compat: unknown RabbitMQ version %q (supported: %s, or a release of one such as 4.3.2)", s, strings.Join(Names(), ", "))
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
