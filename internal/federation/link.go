package federation

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/internal/shovel"
)

// Link states, as GET /api/federation-links reports them
// (rabbit_federation_status: starting, running, or an error).
const (
	Starting = "starting"
	Running  = "running"
	Error    = "error"
)

// Target is a local exchange or queue a policy federates, as the Host
// describes it: what the link needs to declare its upstream twin.
type Target struct {
	VHost string
	Name  string
	Queue bool // a queue; else an exchange
	// Policy is the name of the policy that federates it.
	Policy string
	// Keys are the policy's federation keys.
	Keys

	// The object's declaration, declared on the upstream when the
	// upstream has no such exchange or queue.
	Type                        string // exchanges only
	Durable, AutoDelete, Intern bool
	Args                        amqp091.Table
}

// Binding is one binding whose source is a federated exchange.
type Binding struct {
	Key  string
	Args amqp091.Table
}

// Host is what the links need of the broker they run in.
type Host interface {
	// Targets lists every exchange and queue a policy federates in the
	// vhosts named (those that have upstreams).
	Targets(vhosts []string) []Target
	// Bindings lists the bindings whose source is the exchange.
	Bindings(vhost, exchange string) []Binding
	// Demand reports whether the local queue wants messages: it is
	// empty and has consumers (rabbit_federation_queue's
	// consumer_state_changed runs the link then, and pauses it
	// otherwise).
	Demand(vhost, queue string) bool
	// Watch makes the host poke wake, without waiting, whenever the
	// answer of Bindings(vhost, name) may have changed (a binding from
	// exchange name created or deleted: binding.created and
	// binding.deleted) or, queue true, that of Demand(vhost, name) (the
	// queue emptied, filled or changed consumers); cancel stops it. A
	// poke carries nothing: the link reads again. What a host cannot
	// watch (a queue declared after the call) the links' re-read every
	// Config.Reread catches.
	Watch(vhost, name string, queue bool, wake chan<- struct{}) (cancel func())
	// ClusterName is the name this broker gives itself in the
	// x-received-from and x-bound-from headers and the upstream queue's
	// name (rabbit_nodes:cluster_name).
	ClusterName() string
}

// LinkKey names one link: a local object and one of its upstreams.
type LinkKey struct {
	VHost    string
	Queue    bool
	Name     string
	Upstream string
}

// Status is a snapshot of one link.
type Status struct {
	State string
	// Error is why the last attempt failed (State Error).
	Error string
	// LocalConnection is the name of the link's connection into this
	// broker while it runs.
	LocalConnection string
	// URI is the upstream URI of the last attempt, without its password.
	URI       string
	Timestamp time.Time
	// Forwarded counts the messages republished locally.
	Forwarded int64
}

// env is what every link of a supervisor shares.
type env struct {
	host   Host
	local  shovel.Local
	reread time.Duration // Config.Reread
	now    func() time.Time
}

// link runs one federation link: Run is called once; status may be read
// from any goroutine.
type link struct {
	key    LinkKey
	target Target
	up     Upstream
	env    *env

	// cleanup is set when the link stops because its policy or upstream
	// went away: an exchange link then deletes its upstream queue and
	// internal exchange (resource-cleanup-mode default), as RabbitMQ's
	// link does on a clean shutdown; on the broker's Close it leaves
	// them, so messages wait upstream for the broker to come back.
	cleanup atomic.Bool
	suffix  string // the internal exchange's A/B suffix in use

	mu sync.Mutex
	st Status
}

func newLink(k LinkKey, t Target, up Upstream, e *env) *link {
	return &link{key: k, target: t, up: up, env: e, suffix: "A",
		st: Status{State: Starting, URI: safeURI(first(up.URIs)), Timestamp: e.now()}}
}

func (l *link) status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

func (l *link) update(f func(*Status)) {
	l.mu.Lock()
	f(&l.st)
	l.st.Timestamp = l.env.now()
	l.mu.Unlock()
}

func (l *link) forwarded() {
	l.mu.Lock()
	l.st.Forwarded++
	l.mu.Unlock()
}

// maxBackoff bounds how far run stretches the reconnect delay.
const maxBackoff = 8

// run attempts the link until ctx ends. A failed attempt is retried after
// reconnect-delay; consecutive failures double the wait, up to eight
// times the delay (RabbitMQ 3.10 waits reconnect-delay every time), and
// an attempt that reached running starts the count again. Each attempt
// takes the next URI of the upstream's list (RabbitMQ picks one at
// random).
func (l *link) run(ctx context.Context) {
	failures := 0
	for attempt := 0; ; attempt++ {
		uri := l.up.URIs[attempt%len(l.up.URIs)]
		l.update(func(s *Status) { s.URI = safeURI(uri) })
		var err error
		if l.key.Queue {
			err = l.queueOnce(ctx, uri)
		} else {
			err = l.exchangeOnce(ctx, uri)
		}
		if ctx.Err() != nil {
			return
		}
		if l.status().State == Running {
			failures = 0
		}
		l.update(func(s *Status) { s.State, s.Error, s.LocalConnection = Error, err.Error(), "" })
		d := l.up.ReconnectDelay << min(failures, 3)
		if d > l.up.ReconnectDelay*maxBackoff {
			d = l.up.ReconnectDelay * maxBackoff
		}
		failures++
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// connectionName is rabbit_federation_link_util:connection_name.
func (l *link) connectionName() string {
	return "Federation link (upstream: " + l.up.Name + ", policy: " + l.target.Policy + ")"
}

// dial opens the upstream connection for uri and the local one.
func (l *link) dial(ctx context.Context, uri string) (up, down *amqp091.Connection, uvhost string, err error) {
	up, _, uvhost, err = l.dialUpstreamOnly(ctx, uri, "")
	if err != nil {
		return nil, nil, "", err
	}
	props := amqp091.Table{"connection_name": l.connectionName()}
	down, err = shovel.DialEndpoint(ctx, shovel.Endpoint{URL: "amqp://", Local: true}, l.env.local, l.target.VHost, props)
	if err != nil {
		up.Close()
		return nil, nil, "", fmt.Errorf("local: %w", err)
	}
	return up, down, uvhost, nil
}

// dialUpstreamOnly opens a connection to the upstream uri; its vhost is
// the URI's, or the local object's when the URI names none
// (amqp_uri:parse with the local vhost as default). vhost, when set,
// is used instead.
func (l *link) dialUpstreamOnly(ctx context.Context, uri, vhost string) (*amqp091.Connection, shovel.Endpoint, string, error) {
	e, err := shovel.ParseURI(uri)
	if err != nil {
		return nil, e, "", err
	}
	if vhost == "" {
		vhost = e.VHost
		if u, perr := url.Parse(uri); perr == nil && (u.Path == "" || u.Path == "/") && u.RawPath == "" {
			vhost = l.target.VHost
		}
	}
	c, err := shovel.DialEndpoint(ctx, e, l.env.local, vhost, amqp091.Table{"connection_name": l.connectionName()})
	if err != nil {
		return nil, e, "", fmt.Errorf("upstream %s: %w", safeURI(uri), err)
	}
	return c, e, vhost, nil
}

// disposable runs f on a channel of its own, so that a refusal (a
// passive declaration's 404) closes only that channel
// (rabbit_federation_link_util:disposable_channel_call).
func disposable(c *amqp091.Connection, f func(*amqp091.Channel) error) error {
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	err = f(ch)
	if err == nil {
		ch.Close()
	}
	return err
}

// code is the AMQP reply code of err, 0 for none.
func code(err error) int {
	var e *amqp091.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// forwardPublishing is the message republished locally: the delivery's
// properties with headers h, and no user-id unless trust-user-id
// (rabbit_federation_link_util:forward).
func (l *link) forwardPublishing(m *amqp091.Delivery, h amqp091.Table) amqp091.Publishing {
	p := amqp091.Publishing{
		Headers: h, ContentType: m.ContentType, ContentEncoding: m.ContentEncoding,
		DeliveryMode: m.DeliveryMode, Priority: m.Priority, CorrelationId: m.CorrelationId,
		ReplyTo: m.ReplyTo, Expiration: m.Expiration, MessageId: m.MessageId,
		Timestamp: m.Timestamp, Type: m.Type, AppId: m.AppId, Body: m.Body,
	}
	if l.up.TrustUserID {
		p.UserId = m.UserId
	}
	return p
}

// forwarder is the local end of a running link, shared by the exchange
// and the queue links: the channel it republishes on (in confirm mode for
// on-confirm), the confirmer that settles upstream, and both
// connections' close notifications, which the link's loop selects on.
type forwarder struct {
	pub        *amqp091.Channel
	conf       *confirmer
	confirms   chan amqp091.Confirmation
	upClosed   chan *amqp091.Error
	downClosed chan *amqp091.Error
}

// startForwarding opens the forwarder on dc, settling on the upstream
// channel ch of uc, and marks the link running.
func (l *link) startForwarding(uc, dc *amqp091.Connection, ch *amqp091.Channel) (*forwarder, error) {
	pub, err := dc.Channel()
	if err != nil {
		return nil, err
	}
	f := &forwarder{pub: pub, conf: &confirmer{ch: ch}}
	if l.up.AckMode == OnConfirm {
		if err := pub.Confirm(false); err != nil {
			return nil, err
		}
		f.confirms = pub.NotifyPublish(make(chan amqp091.Confirmation, max(l.up.PrefetchCount, 1)))
	}
	f.upClosed = uc.NotifyClose(make(chan *amqp091.Error, 1))
	f.downClosed = dc.NotifyClose(make(chan *amqp091.Error, 1))
	l.update(func(s *Status) { s.State, s.Error, s.LocalConnection = Running, "", l.connectionName() })
	return f, nil
}

// forward republishes m, rewritten as p, to exchange with key, and
// settles it upstream as ack-mode asks.
func (l *link) forward(ctx context.Context, f *forwarder, m *amqp091.Delivery, exchange, key string, p amqp091.Publishing) error {
	if err := f.pub.PublishWithContext(ctx, exchange, key, false, false, p); err != nil {
		return err
	}
	return l.settle(f.conf, m)
}

// confirmed settles upstream the delivery a local confirm answers; ok
// false (the confirms channel closed) means the local channel closed.
func (l *link) confirmed(f *forwarder, c amqp091.Confirmation, ok bool) error {
	if !ok {
		return errors.New("local channel closed")
	}
	return f.conf.confirmed(c, l)
}

// confirmer tracks the upstream delivery tags of messages republished
// with confirms, in publish order, and settles each upstream when its
// confirm arrives (rabbit_federation_link_util:ack and nack).
type confirmer struct {
	ch      *amqp091.Channel
	pending []uint64
}

func (c *confirmer) confirmed(conf amqp091.Confirmation, l *link) error {
	if len(c.pending) == 0 {
		return nil
	}
	tag := c.pending[0]
	c.pending = c.pending[1:]
	if conf.Ack {
		l.forwarded()
		return c.ch.Ack(tag, false)
	}
	// RabbitMQ passes the nack on without requeue: the upstream drops
	// (or dead-letters) what this broker refused.
	return c.ch.Nack(tag, false, false)
}

// settle does what ack-mode asks once a delivery was republished.
func (l *link) settle(c *confirmer, m *amqp091.Delivery) error {
	switch l.up.AckMode {
	case OnConfirm:
		c.pending = append(c.pending, m.DeliveryTag)
	case OnPublish:
		l.forwarded()
		return m.Ack(false)
	default:
		l.forwarded()
	}
	return nil
}

// safeURI is amqp_uri:remove_credentials: the URI without its user
// and password.
func safeURI(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// errClosed formats a connection or channel close.
func errClosed(what string, e *amqp091.Error) error {
	if e == nil {
		return errors.New(what + " closed")
	}
	return fmt.Errorf("%s closed: %s", what, strings.TrimSpace(e.Error()))
}
