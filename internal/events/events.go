package events

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
)

// Kind says what happened. The zero Kind is invalid.
type Kind uint8

// The kinds; broker.EventKind documents each for users.
const (
	ConnectionCreated Kind = iota + 1
	ConnectionClosed
	ConsumerCreated
	ConsumerDeleted
	MessageReturned
	MessageDeadLettered
	MessageExpired
	BindingCreated
	BindingDeleted

	kindEnd // one past the last kind
)

// NumKinds is the number of valid kinds, for tables indexed by Kind.
const NumKinds = int(kindEnd)

// Mask is a set of kinds, bit k set for Kind k.
type Mask uint32

// All is the mask of every kind.
const All = Mask(1<<kindEnd - 2) // bits 1 .. kindEnd-1

// MaskOf returns the set of kinds; none means All.
func MaskOf(kinds ...Kind) Mask {
	if len(kinds) == 0 {
		return All
	}
	var m Mask
	for _, k := range kinds {
		m |= 1 << k
	}
	return m & All
}

// Reasons a consumer was deleted (Event.Reason of ConsumerDeleted).
const (
	ReasonCancel        = "basic.cancel"   // the client cancelled it
	ReasonChannelClosed = "channel closed" // its channel or connection closed
	ReasonQueueDeleted  = "queue deleted"  // the server cancelled it
)

// Event is one thing that happened, as a source reports it. Fields that
// do not apply to its Kind are zero; the Hub adds the time and each
// subscription its drop count.
type Event struct {
	Kind Kind

	VHost string
	// Connection identifies the connection (session.Conn.ID), Name is the
	// client's connection_name, Peer its remote address; Direct marks an
	// in-process connection.
	Connection string
	Name       string
	User       string
	Peer       string
	Direct     bool
	Channel    uint16

	ConsumerTag string
	Queue       string
	Exchange    string
	RoutingKey  string
	MessageID   string

	// A binding's: Exchange is its source, RoutingKey its key,
	// Destination its destination (an exchange when DestinationExchange,
	// else a queue) and Arguments its arguments.
	Destination         string
	DestinationExchange bool
	Arguments           amqp.Table

	// Code and Reason: a connection's close code and text, a return's
	// reply code and text, a dead-lettering's reason, a consumer's end.
	Code   uint16
	Reason string
	// DeadLetterExchange is where a dead-lettered or expired message's
	// copy was published ("" is the default exchange) unless Discarded:
	// the queue had no dead-letter exchange and the message was dropped.
	DeadLetterExchange string
	Discarded          bool
}

// MessageID returns the message-id property of raw properties, "" when
// there is none or they do not decode. It copies the id, so the event
// does not keep the properties alive.
func MessageID(props []byte) string {
	if len(props) == 0 {
		return ""
	}
	p, err := amqp.DecodeProperties(props)
	if err != nil {
		return ""
	}
	return strings.Clone(p.MessageID)
}

// subscriber is one subscription, whatever type its channel carries.
type subscriber interface {
	offer(e Event, at time.Time)
	close()
	mask() Mask
}

// Hub fans events out to subscriptions. Create it with NewHub.
type Hub struct {
	clock clock.Clock
	// wanted is the union of the subscriptions' masks: On's one load.
	wanted atomic.Uint32
	// subs is the current subscriptions, replaced (never changed in
	// place) under mu, so Emit reads it without a lock.
	subs atomic.Pointer[[]subscriber]
	mu   struct {
		sync.Mutex
		closed bool
	}
}

// NewHub returns a Hub that stamps events with clk's time (nil:
// clock.Real).
func NewHub(clk clock.Clock) *Hub {
	if clk == nil {
		clk = clock.Real
	}
	return &Hub{clock: clk}
}

// On reports whether some subscription wants events of kind k. It is the
// sources' guard: one atomic load, and false for a nil Hub.
func (h *Hub) On(k Kind) bool {
	return h != nil && Mask(h.wanted.Load())&(1<<k) != 0
}

// Emit hands e to every subscription that wants its kind, without ever
// waiting: a subscription whose buffer is full drops it and counts the
// drop. e is read during the call only. (Events travel by value: a
// pointer handed through the subscriptions' interface would make every
// event a heap allocation.)
func (h *Hub) Emit(e Event) {
	if !h.On(e.Kind) {
		return
	}
	subs := h.subs.Load()
	if subs == nil {
		return
	}
	at := h.clock.Now()
	for _, s := range *subs {
		if s.mask()&(1<<e.Kind) != 0 {
			s.offer(e, at)
		}
	}
}

// Close ends every subscription (their channels close) and makes later
// ones end at once. Idempotent.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return
	}
	h.mu.closed = true
	old := h.subs.Swap(nil)
	h.wanted.Store(0)
	if old != nil {
		for _, s := range *old {
			s.close()
		}
	}
}

// add registers s; false when the Hub is closed.
func (h *Hub) add(s subscriber) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return false
	}
	var subs []subscriber
	if old := h.subs.Load(); old != nil {
		subs = slices.Clone(*old)
	}
	subs = append(subs, s)
	h.publishLocked(subs)
	return true
}

// remove unregisters s and closes it; nothing when it is gone already.
func (h *Hub) remove(s subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.subs.Load()
	if old == nil {
		return
	}
	i := slices.Index(*old, s)
	if i < 0 {
		return
	}
	subs := slices.Delete(slices.Clone(*old), i, i+1)
	h.publishLocked(subs)
	s.close()
}

// publishLocked installs subs and the union of their masks.
func (h *Hub) publishLocked(subs []subscriber) {
	var m Mask
	for _, s := range subs {
		m |= s.mask()
	}
	if len(subs) == 0 {
		h.subs.Store(nil)
	} else {
		h.subs.Store(&subs)
	}
	h.wanted.Store(uint32(m))
}

// Convert builds what a subscription's channel carries from an event, the
// time the Hub stamped and the events dropped just before it.
type Convert[T any] func(e Event, at time.Time, dropped uint64) T

// Subscribe returns a channel of buffer events of the kinds in mask,
// converted by conv, until ctx ends or the Hub closes; then the channel
// is closed. buffer must be at least 1.
func Subscribe[T any](ctx context.Context, h *Hub, buffer int, mask Mask, conv Convert[T]) <-chan T {
	s := &subscription[T]{kinds: mask & All, conv: conv, ch: make(chan T, max(buffer, 1))}
	if ctx.Err() != nil || !h.add(s) {
		close(s.ch)
		return s.ch
	}
	stop := context.AfterFunc(ctx, func() { h.remove(s) })
	s.mu.Lock()
	s.stop = stop
	closed := s.mu.closed
	s.mu.Unlock()
	if closed {
		stop() // the Hub closed it meanwhile: forget the context
	}
	return s.ch
}

// subscription is one Subscribe: its channel and drop count.
type subscription[T any] struct {
	kinds Mask
	conv  Convert[T]
	ch    chan T
	mu    struct {
		sync.Mutex
		closed  bool
		dropped uint64 // dropped since the last event sent
	}
	stop func() bool // context.AfterFunc's stop, under mu
}

func (s *subscription[T]) mask() Mask { return s.kinds }

// offer sends e unless the buffer is full. Only offer sends, under mu, so
// room seen here cannot vanish before the send: it never blocks.
func (s *subscription[T]) offer(e Event, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	if len(s.ch) == cap(s.ch) {
		s.mu.dropped++
		return
	}
	s.ch <- s.conv(e, at, s.mu.dropped)
	s.mu.dropped = 0
}

func (s *subscription[T]) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	s.mu.closed = true
	close(s.ch)
	if s.stop != nil {
		s.stop()
	}
}
