package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqpconv"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
)

// The Go introspection API's reads (the root's PeekQueue, Unacked and
// WaitIdle): its public types have the same fields, in the same order, as
// the ones here, so the root converts each with a type conversion.

// Message is a ready message as PeekQueue shows it.
type Message struct {
	Exchange, RoutingKey string
	Redelivered          bool
	DeliveryCount        uint32
	Publishing           amqp091.Publishing
}

// Publishing is a stored message's decoded properties and a copy of its
// body (the store may share its bytes).
func Publishing(p *amqp.Properties, body []byte) amqp091.Publishing {
	pub := amqpconv.Publishing(p)
	pub.Body = slices.Clone(body)
	return pub
}

// Peek returns up to n of q's ready messages in delivery order, without
// consuming them.
func Peek(ctx context.Context, q *vhost.Queue, n int) ([]Message, error) {
	name := q.Def.Name
	msgs, err := q.Peek(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("broker: peek %q: %w", name, err)
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		p, err := amqp.DecodeProperties(m.Properties)
		if err != nil {
			// Stored exactly as published, and publishing checked them.
			return nil, fmt.Errorf("broker: peek %q: message %d: %w", name, m.Offset, err)
		}
		out[i] = Message{
			Exchange: m.Exchange, RoutingKey: m.RoutingKey,
			Redelivered: m.Redelivered, DeliveryCount: m.Deliveries,
			Publishing: Publishing(&p, m.Body),
		}
	}
	return out, nil
}

// Delayed is a message an x-delayed-message exchange holds, as
// PeekDelayed shows it.
type Delayed struct {
	Exchange, RoutingKey string
	Due                  time.Time
	Delay                time.Duration
	Publishing           amqp091.Publishing
}

// PeekDelayed returns up to n of the messages exchange of vh holds,
// earliest due first, without routing them.
func PeekDelayed(ctx context.Context, vh *vhost.VHost, exchange string, n int) ([]Delayed, error) {
	msgs, err := vh.DelayedPeek(ctx, exchange, n)
	if err != nil {
		return nil, fmt.Errorf("broker: peek delayed %q: %w", exchange, err)
	}
	out := make([]Delayed, len(msgs))
	for i, m := range msgs {
		p, err := amqp.DecodeProperties(m.Properties)
		if err != nil {
			return nil, fmt.Errorf("broker: peek delayed %q: %w", exchange, err)
		}
		out[i] = Delayed{
			Exchange: m.Exchange, RoutingKey: m.RoutingKey,
			Due: time.Unix(0, m.Due), Delay: time.Duration(m.Delay) * time.Millisecond,
			Publishing: Publishing(&p, m.Body),
		}
	}
	return out, nil
}

// Delivery is one delivery a client holds without having settled it.
type Delivery struct {
	Connection           string
	Channel              uint16
	DeliveryTag          uint64
	ConsumerTag          string
	DeliveryCount        uint32
	Redelivered          bool
	DeliveredAt          time.Time
	Exchange, RoutingKey string
	MessageID            string
	Publishing           amqp091.Publishing
	BodySize             int
}

// Unacked lists q's deliveries that wait for a settlement, sorted as
// conns is (by connection), then by channel and delivery tag: the queue's
// actor lists its outstanding deliveries, the connections their tags.
func Unacked(ctx context.Context, q *vhost.Queue, conns []*session.Conn, bodies bool) ([]Delivery, error) {
	name := q.Def.Name
	outs, err := q.Outstanding(ctx, bodies)
	if err != nil {
		return nil, fmt.Errorf("broker: unacked %q: %w", name, err)
	}
	// The queue knows the message and its count; the channel knows the
	// tag. They meet on (connection, channel, offset, claim).
	type key struct {
		conn    string
		channel uint16
		offset  uint64
		claim   uint64
	}
	byRef := make(map[key]*queue.Outstanding, len(outs))
	for i := range outs {
		o := &outs[i]
		byRef[key{o.Owner.Connection, o.Owner.Channel, o.Offset, o.Claim}] = o
	}
	var res []Delivery
	for _, c := range conns {
		for _, u := range c.Unacked() {
			if u.Queue != q {
				continue
			}
			o, ok := byRef[key{c.ID(), u.Channel, u.Ref.Offset, u.Ref.Claim}]
			if !ok {
				continue // settled between the two reads
			}
			p, err := amqp.DecodeProperties(o.Properties)
			if err != nil {
				// Stored exactly as published, and publishing checked them.
				return nil, fmt.Errorf("broker: unacked %q: message %d: %w", name, o.Offset, err)
			}
			pub := Publishing(&p, nil)
			pub.Body = o.Body // already the caller's copy
			res = append(res, Delivery{
				Connection: c.ID(), Channel: u.Channel, DeliveryTag: u.DeliveryTag,
				ConsumerTag: u.ConsumerTag, DeliveryCount: o.DeliveryCount,
				Redelivered: o.Redelivered, DeliveredAt: o.DeliveredAt,
				Exchange: o.Exchange, RoutingKey: o.RoutingKey,
				MessageID: p.MessageID, Publishing: pub, BodySize: o.BodySize,
			})
		}
	}
	return res, nil
}

// Idler is what WaitIdle watches.
type Idler struct {
	// Conns lists the open connections, sorted by ID; VHosts the open
	// vhosts.
	Conns  func() []*session.Conn
	VHosts func() []*vhost.VHost
	// Busy reports work outside connections and queues (delayed messages
	// being stored or due).
	Busy func() bool
}

// WaitIdle blocks until i sees no work in hand twice in a row with no
// byte moving on any connection in between, or ctx ends (it then returns
// ctx's error). It polls with a short backoff.
func (i Idler) WaitIdle(ctx context.Context) error {
	backoff := 50 * time.Microsecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	stable := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if i.pass(ctx) {
			stable++
			if stable == 2 {
				return nil
			}
			continue
		}
		stable = 0
		timer.Reset(backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		backoff = min(2*backoff, 5*time.Millisecond)
	}
}

// pass checks every connection, then every queue and Busy, then every
// connection again; it reports true when all were idle and no byte moved
// on any connection meanwhile.
func (i Idler) pass(ctx context.Context) bool {
	before, ok := i.conns()
	if !ok {
		return false
	}
	for _, vh := range i.VHosts() {
		for _, q := range vh.Queues() {
			idle, err := q.Idle(ctx)
			if err != nil && !errors.Is(err, queue.ErrDeleted) {
				return false
			}
			if err == nil && !idle {
				return false
			}
		}
	}
	if i.Busy() {
		return false
	}
	after, ok := i.conns()
	return ok && slices.Equal(before, after)
}

// activity is one connection's part of conns' fingerprint.
type activity struct {
	conn  *session.Conn
	bytes uint64
}

// conns reports whether every connection is idle, with a fingerprint of
// their activity (which connections, how many bytes).
func (i Idler) conns() ([]activity, bool) {
	cs := i.Conns()
	fp := make([]activity, 0, len(cs))
	for _, c := range cs {
		idle, bytes := c.Idle()
		if !idle {
			return nil, false
		}
		fp = append(fp, activity{c, bytes})
	}
	return fp, true
}
