package session

import (
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
)

// This file is the read-only side of connections and channels for the
// management API, metrics and test introspection. Connection and channel
// state belongs to the reader goroutine, so nothing here reads it directly
// except what is safe to read from another goroutine:
//
//   - fields set during the handshake (user, vhost, client properties,
//     channel-max), read only after an atomic load saw the connection open:
//     they are written before that store and never again;
//   - atomics and state under its own lock (the outbox, a channel's
//     deliveries, its confirms);
//   - what the stream counts (transport.Stats: bytes, whether the reader
//     waits in a read);
//   - the tracker below: a registry of open channels that newChannel and
//     release keep (one-line hooks), with the few reader-owned channel
//     settings copied out after each method that changes them.
//
// Lock order: the tracker's mutex is taken alone or before a channel's
// deliveries lock, never after it and never around a call into a queue.

// Counters count connection-level events since the broker started. The
// broker hands one to every connection through Config.Counters; a nil
// *Counters counts nothing.
type Counters struct {
	ConnectionsOpened atomic.Uint64 // streams accepted (handshake or not)
	ConnectionsClosed atomic.Uint64
	ChannelsOpened    atomic.Uint64
	ChannelsClosed    atomic.Uint64
	// Publish counts basic.publish received (routed or not, tx or not).
	Publish atomic.Uint64
	// Unroutable publishes: returned to a mandatory publisher (basic.return)
	// or dropped.
	ReturnUnroutable atomic.Uint64
	DropUnroutable   atomic.Uint64
	// Confirm counts publishes answered to a confirm-mode publisher
	// (basic.ack, or basic.nack when a queue failed to store it).
	Confirm atomic.Uint64
}

// published counts one basic.publish routed to queues queues.
func (n *Counters) published(queues int, mandatory bool) {
	if n == nil {
		return
	}
	n.Publish.Add(1)
	if queues == 0 {
		if mandatory {
			n.ReturnUnroutable.Add(1)
		} else {
			n.DropUnroutable.Add(1)
		}
	}
}

// countAnswered runs deferred in answerLocked: every publish answered
// since from (the answered mark when it started) was confirmed.
func (c *confirms) countAnswered(ch *Channel, from uint64) {
	if n := ch.conn.cfg.Counters; n != nil && c.answered > from {
		n.Confirm.Add(c.answered - from)
	}
}

// tracker is a connection's registry of open channels, which inspection
// reads from other goroutines, and when the connection began.
type tracker struct {
	counters    *Counters
	connectedAt time.Time

	mu       sync.Mutex
	channels map[uint16]*channelState
}

// channelState is what the registry keeps per open channel: the channel
// itself, and copies of the reader-owned settings inspection shows.
type channelState struct {
	ch       *Channel
	prefetch atomic.Uint32 // basic.qos global=false
	tx       atomic.Bool
	confirm  atomic.Pointer[confirms]
}

// track starts a connection's registry and counts the connection as
// opened.
func (n *Counters) track() *tracker {
	if n != nil {
		n.ConnectionsOpened.Add(1)
	}
	return &tracker{counters: n, connectedAt: time.Now(), channels: make(map[uint16]*channelState)}
}

// tracker returns the connection's registry.
func (c *Conn) tracker() *tracker { return c.trk }

// trackChannel registers a new channel (newChannel's hook).
func (c *Conn) trackChannel(ch *Channel) {
	t := c.tracker()
	t.mu.Lock()
	t.channels[ch.id] = &channelState{ch: ch}
	t.mu.Unlock()
	if t.counters != nil {
		t.counters.ChannelsOpened.Add(1)
	}
}

// untrackChannel forgets a channel that closed (release's hook; release may
// run twice for one channel, the count is taken once).
func (c *Conn) untrackChannel(ch *Channel) {
	t := c.tracker()
	t.mu.Lock()
	s, ok := t.channels[ch.id]
	if ok && s.ch == ch {
		delete(t.channels, ch.id)
	}
	t.mu.Unlock()
	if ok && s.ch == ch && t.counters != nil {
		t.counters.ChannelsClosed.Add(1)
	}
}

// noteState copies the channel settings inspection shows after a method
// that may change them (handleBrokerMethod's deferred hook). Only qos,
// confirm.select and tx.select change them; other methods cost a type
// switch.
func (ch *Channel) noteState(m amqp.Method) {
	switch m.(type) {
	case *amqp.BasicQos, *amqp.ConfirmSelect, *amqp.TxSelect:
	default:
		return
	}
	t := ch.conn.tracker()
	t.mu.Lock()
	s := t.channels[ch.id]
	t.mu.Unlock()
	if s == nil || s.ch != ch {
		return
	}
	s.prefetch.Store(uint32(ch.prefetch))
	s.tx.Store(ch.tx != nil)
	s.confirm.Store(ch.confirm)
}

// ConnInfo describes a connection.
type ConnInfo struct {
	ID string
	// State is RabbitMQ's word for it: "starting", "tuning", "opening",
	// "running", "blocking" (an alarm is on but the connection has not
	// published since), "blocked" (its reader is held by an alarm) or
	// "closing".
	State string
	// User, VHost, ClientProperties, ChannelMax, FrameMax and Heartbeat
	// are known once the connection is open ("running" or "closing").
	User             string
	VHost            string
	ClientProperties amqp.Table
	ChannelMax       uint16
	FrameMax         uint32
	Heartbeat        time.Duration
	ConnectedAt      time.Time
	// RecvOct and SendOct count the bytes read and written.
	RecvOct, SendOct uint64
	Channels         int
	// Peer and Local are the stream's addresses when it is a net.Conn.
	Peer, Local net.Addr
	// Direct: an in-process connection (NewDirect), without a socket,
	// handshake or heartbeats, or one the broker marked as its own
	// (MarkInternal), as RabbitMQ lists its direct connections.
	Direct bool
}

// Info describes the connection. Safe from any goroutine.
func (c *Conn) Info() ConnInfo {
	in := ConnInfo{ID: c.id, Direct: c.sink != nil || c.internal}
	st := connState(c.state.Load())
	open := st == stateOpen
	switch {
	case c.closing.Load():
		in.State = "closing"
	case open && c.Blocked():
		in.State = "blocked"
	case open && c.alarms != nil && c.alarms.Active() != 0:
		in.State = "blocking"
	case open:
		in.State = "running"
	case st == stateTuning:
		in.State = "tuning"
	case st == stateOpening:
		in.State = "opening"
	default:
		in.State = "starting"
	}
	if open {
		// Written by the reader before it stored stateOpen, never after.
		in.User, in.VHost = c.user, c.vhost
		in.ClientProperties = c.clientProperties
		in.ChannelMax = c.channelMax
	}
	in.FrameMax = c.frameMax.Load()
	c.out.Lock()
	in.Heartbeat = 2 * c.out.heartbeatHalf
	c.out.Unlock()
	t := c.tracker()
	in.ConnectedAt = t.connectedAt
	t.mu.Lock()
	in.Channels = len(t.channels)
	t.mu.Unlock()
	if c.tr != nil {
		st := c.tr.Stats()
		in.RecvOct, in.SendOct = st.Recv, st.Sent
		p := c.tr.Peer()
		in.Peer, in.Local = p.Remote, p.Local
	}
	return in
}

// ConsumerInfo describes one consumer of a channel.
type ConsumerInfo struct {
	Tag       string
	Queue     *vhost.Queue
	NoAck     bool
	Exclusive bool
	Prefetch  uint16
}

// ChannelInfo describes an open channel.
type ChannelInfo struct {
	Number         uint16
	Consumers      []ConsumerInfo // sorted by tag
	Unacked        int
	Prefetch       uint16 // basic.qos global=false: the limit of new consumers
	GlobalPrefetch uint16 // basic.qos global=true
	Confirm        bool
	Unconfirmed    int // publishes not yet confirmed
	Transactional  bool
	Closing        bool // the channel is being closed
}

// Channels describes the open channels, by number. Safe from any
// goroutine.
func (c *Conn) Channels() []ChannelInfo {
	t := c.tracker()
	t.mu.Lock()
	states := make([]*channelState, 0, len(t.channels))
	for _, s := range t.channels {
		states = append(states, s)
	}
	t.mu.Unlock()
	out := make([]ChannelInfo, 0, len(states))
	for _, s := range states {
		ch := s.ch
		in := ChannelInfo{
			Number:         ch.id,
			Prefetch:       uint16(s.prefetch.Load()),
			GlobalPrefetch: ch.credit.Limit(),
			Transactional:  s.tx.Load(),
		}
		if conf := s.confirm.Load(); conf != nil {
			in.Confirm = true
			conf.mu.Lock()
			in.Unconfirmed = int(conf.next - conf.answered)
			conf.mu.Unlock()
		}
		d := &ch.dl
		d.Lock()
		in.Closing = d.closed
		in.Unacked = d.unacked.Len()
		for _, cons := range d.consumers {
			in.Consumers = append(in.Consumers, ConsumerInfo{
				Tag: cons.qc.Tag, Queue: cons.q, NoAck: cons.qc.NoAck,
				Exclusive: cons.qc.Exclusive, Prefetch: cons.credit.Limit(),
			})
		}
		d.Unlock()
		slices.SortFunc(in.Consumers, func(a, b ConsumerInfo) int { return cmpString(a.Tag, b.Tag) })
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b ChannelInfo) int { return int(a.Number) - int(b.Number) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// UnackedInfo is one delivery a channel holds unacknowledged.
type UnackedInfo struct {
	Channel     uint16
	DeliveryTag uint64
	Queue       *vhost.Queue
	// Ref is the queue's name for the delivery (queue.Outstanding matches
	// it by Offset and Claim).
	Ref         queue.Ref
	ConsumerTag string // "" for basic.get
}

// Unacked lists every unacknowledged delivery of the connection, by
// channel and tag. Safe from any goroutine.
func (c *Conn) Unacked() []UnackedInfo {
	t := c.tracker()
	t.mu.Lock()
	chans := make([]*Channel, 0, len(t.channels))
	for _, s := range t.channels {
		chans = append(chans, s.ch)
	}
	t.mu.Unlock()
	slices.SortFunc(chans, func(a, b *Channel) int { return int(a.id) - int(b.id) })
	var out []UnackedInfo
	for _, ch := range chans {
		d := &ch.dl
		d.Lock()
		for tag, p := range d.unacked.All() {
			u := UnackedInfo{Channel: ch.id, DeliveryTag: tag, Queue: p.q, Ref: p.ref}
			if p.cons != nil {
				u.ConsumerTag = p.cons.qc.Tag
			}
			out = append(out, u)
		}
		d.Unlock()
	}
	return out
}

// Idle reports whether the connection has no work in hand: its reader
// waits in a read having handled every complete frame it read (and, on a
// transport.Pipe stream, everything the client wrote), and its writer has
// written everything queued. A connection whose writer is gone counts as
// idle. activity changes whenever bytes move, so a caller that sees the
// same activity before and after other checks knows nothing moved between.
// Safe from any goroutine.
func (c *Conn) Idle() (idle bool, activity uint64) {
	if c.sink != nil {
		// A direct connection has no reader or writer: Handle returns
		// when the method was handled.
		return true, 0
	}
	// Stats loads Recv before Reading, so a Recv that includes a read and
	// Reading set mean a later read.
	st := c.tr.Stats()
	c.out.Lock()
	// writing covers a batch from the moment it leaves buf until its
	// write returned.
	flushed := c.out.stopped || (len(c.out.buf) == 0 && c.out.writing == 0)
	stopped := c.out.stopped
	c.out.Unlock()
	activity = st.Recv + st.Sent
	return (st.Reading && st.CaughtUp || stopped) && flushed, activity
}

// logEnded logs the end of a connection with who it was (Serve's hook;
// it runs on the reader goroutine, which owns these fields).
func (c *Conn) logEnded(err error) {
	if n := c.cfg.Counters; n != nil {
		n.ConnectionsClosed.Add(1)
	}
	attrs := []any{"user", c.user, "vhost", c.vhost, clientAttr(c.clientProperties)}
	st := c.tr.Stats()
	attrs = append(attrs, "duration", time.Since(c.tracker().connectedAt).Round(time.Millisecond),
		"recv_oct", st.Recv, "send_oct", st.Sent)
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	c.log.Info("session: connection closed", attrs...)
}

// clientAttr is the client's self-description from connection.start-ok as
// one log group: what an operator needs to tell clients apart.
func clientAttr(props amqp.Table) slog.Attr {
	var attrs []any
	for _, k := range []string{"connection_name", "product", "version", "platform"} {
		if v, ok := props[k].(string); ok && v != "" {
			attrs = append(attrs, k, v)
		}
	}
	return slog.Group("client", attrs...)
}
