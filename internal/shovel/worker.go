package shovel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// ErrDone is what Run returns when src-delete-after was reached: the owner
// deletes the shovel's parameter, as RabbitMQ does.
var ErrDone = errors.New("shovel: delete-after reached")

// Link states, as GET /api/shovels reports them.
const (
	Starting   = "starting"
	Running    = "running"
	Terminated = "terminated"
)

// Status is a snapshot of one link.
type Status struct {
	State     string
	Reason    string
	Forwarded int64
	// Remaining is how many messages src-delete-after still allows, -1 for never.
	Remaining int64
	// Since is when State last changed (RabbitMQ's status timestamp).
	Since time.Time
}

// Worker runs one shovel link. Run is called once; Status may be called
// from any goroutine.
type Worker struct {
	def   Def
	local Local

	mu  sync.Mutex
	st  Status
	set bool // Remaining was fixed (queue-length: at the first connection)
}

// NewWorker returns a worker for def; local may be zero when no URI is
// local.
func NewWorker(def Def, local Local) *Worker {
	w := &Worker{def: def, local: local, st: Status{State: Starting, Remaining: -1, Since: time.Now()}}
	if def.DeleteAfter == "" {
		w.st.Remaining, w.set = def.DeleteCount, true
	}
	return w
}

// Status returns the link's current state.
func (w *Worker) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// update changes the status under the lock, dating a change of state.
func (w *Worker) update(f func(*Status)) {
	w.mu.Lock()
	was := w.st.State
	f(&w.st)
	if w.st.State != was {
		w.st.Since = time.Now()
	}
	w.mu.Unlock()
}

// Run moves messages until ctx ends (returns ctx.Err()) or delete-after is
// reached (returns ErrDone). A failed connection is retried after the
// reconnect delay, each time with the next URI of the lists.
func (w *Worker) Run(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := w.once(ctx, attempt)
		if errors.Is(err, ErrDone) {
			w.update(func(s *Status) { s.State, s.Reason = Terminated, "delete-after reached" })
			return ErrDone
		}
		if ctx.Err() != nil {
			w.update(func(s *Status) { s.State, s.Reason = Terminated, "stopped" })
			return ctx.Err()
		}
		w.update(func(s *Status) { s.State, s.Reason = Starting, err.Error() })
		t := time.NewTimer(w.def.ReconnectDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			w.update(func(s *Status) { s.State = Terminated })
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (w *Worker) dial(ctx context.Context, uri string) (*amqp091.Connection, error) {
	e, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	return dialEndpoint(ctx, e, w.local, "", amqp091.Table{"connection_name": "Shovel"}, true)
}

// once runs one connection pair until it fails, ctx ends or the link is done.
func (w *Worker) once(ctx context.Context, attempt int) error {
	d := w.def
	src, err := w.dial(ctx, d.SrcURIs[attempt%len(d.SrcURIs)])
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	dst, err := w.dial(ctx, d.DestURIs[attempt%len(d.DestURIs)])
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	defer dst.Close()
	sch, err := src.Channel()
	if err != nil {
		return err
	}
	dch, err := dst.Channel()
	if err != nil {
		return err
	}
	queue := d.SrcQueue
	if queue == "" {
		q, err := sch.QueueDeclare("", false, true, true, false, nil)
		if err != nil {
			return err
		}
		if err := sch.QueueBind(q.Name, d.SrcExchangeKey, d.SrcExchange, false, nil); err != nil {
			return err
		}
		queue = q.Name
	} else if d.DeleteAfter == QueueLength && !w.isSet() {
		q, err := sch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil {
			return err
		}
		w.update(func(s *Status) { s.Remaining = int64(q.Messages) })
		w.mu.Lock()
		w.set = true
		w.mu.Unlock()
	}
	if d.DestQueue != "" {
		// RabbitMQ declares a missing destination queue durable.
		if _, err := dch.QueueDeclarePassive(d.DestQueue, true, false, false, false, nil); err != nil {
			if dch, err = dst.Channel(); err != nil {
				return err
			}
			if _, err := dch.QueueDeclare(d.DestQueue, true, false, false, false, nil); err != nil {
				return err
			}
		}
	}
	if w.Status().Remaining == 0 {
		return ErrDone
	}
	prefetch := d.Prefetch
	if r := w.Status().Remaining; r > 0 && r < int64(prefetch) {
		prefetch = int(r)
	}
	if err := sch.Qos(prefetch, 0, false); err != nil {
		return err
	}
	var confirms chan amqp091.Confirmation
	if d.AckMode == OnConfirm {
		if err := dch.Confirm(false); err != nil {
			return err
		}
		confirms = dch.NotifyPublish(make(chan amqp091.Confirmation, prefetch))
	}
	deliveries, err := sch.Consume(queue, "", d.AckMode == NoAck, false, false, false, amqp091.Table(d.SrcConsumerArgs))
	if err != nil {
		return err
	}
	w.update(func(s *Status) { s.State, s.Reason = Running, "" })
	srcClosed := src.NotifyClose(make(chan *amqp091.Error, 1))
	dstClosed := dst.NotifyClose(make(chan *amqp091.Error, 1))

	var pending []uint64 // source tags awaiting a confirm, in publish order
	published := int64(0)
	limit := w.Status().Remaining // -1: no limit
	for {
		if limit >= 0 && published >= limit && len(pending) == 0 {
			return ErrDone
		}
		in := deliveries
		if limit >= 0 && published >= limit {
			in = nil // wait for the outstanding confirms only
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-srcClosed:
			return fmt.Errorf("source closed: %v", e)
		case e := <-dstClosed:
			return fmt.Errorf("destination closed: %v", e)
		case m, ok := <-in:
			if !ok {
				return errors.New("source consumer cancelled")
			}
			if err := w.publish(ctx, dch, m); err != nil {
				return err
			}
			published++
			switch d.AckMode {
			case OnConfirm:
				pending = append(pending, m.DeliveryTag)
			case OnPublish:
				if err := m.Ack(false); err != nil {
					return err
				}
				w.forwarded()
			case NoAck:
				w.forwarded()
			}
		case c, ok := <-confirms:
			if !ok {
				return errors.New("destination channel closed")
			}
			tag := pending[0]
			pending = pending[1:]
			if c.Ack {
				if err := sch.Ack(tag, false); err != nil {
					return err
				}
				w.forwarded()
			} else {
				// Refused by the destination: back to the source, not lost.
				if err := sch.Nack(tag, false, true); err != nil {
					return err
				}
				published--
			}
		}
	}
}

func (w *Worker) isSet() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.set
}

func (w *Worker) forwarded() {
	w.update(func(s *Status) {
		s.Forwarded++
		if s.Remaining > 0 {
			s.Remaining--
		}
	})
}

// publish sends m to the destination with the definition's routing,
// publish properties and headers.
func (w *Worker) publish(ctx context.Context, ch *amqp091.Channel, m amqp091.Delivery) error {
	d := w.def
	exchange, key := d.DestExchange, m.RoutingKey
	if d.DestQueue != "" {
		exchange, key = "", d.DestQueue
	} else if d.HasDestKey {
		key = d.DestKey
	}
	p := amqp091.Publishing{
		Headers: m.Headers, ContentType: m.ContentType, ContentEncoding: m.ContentEncoding,
		DeliveryMode: m.DeliveryMode, Priority: m.Priority, CorrelationId: m.CorrelationId,
		ReplyTo: m.ReplyTo, Expiration: m.Expiration, MessageId: m.MessageId,
		Timestamp: m.Timestamp, Type: m.Type, UserId: m.UserId, AppId: m.AppId, Body: m.Body,
	}
	applyProperties(&p, d.PublishProperties)
	if d.AddForwardHeaders || d.AddTimestamp {
		h := amqp091.Table{}
		for k, v := range p.Headers {
			h[k] = v
		}
		if d.AddForwardHeaders {
			h["x-shovelled"] = []any{amqp091.Table{
				"shovel-type": "dynamic", "src-uri": d.SrcURIs[0], "dest-uri": d.DestURIs[0],
				"src-queue": d.SrcQueue, "src-exchange": d.SrcExchange,
			}}
		}
		if d.AddTimestamp {
			h["x-shovelled-timestamp"] = time.Now().Unix()
		}
		p.Headers = h
	}
	return ch.PublishWithContext(ctx, exchange, key, false, false, p)
}

// applyProperties overrides the message's properties with
// dest-publish-properties, as RabbitMQ's shovel does.
func applyProperties(p *amqp091.Publishing, props map[string]any) {
	for k, v := range props {
		s, _ := v.(string)
		switch k {
		case "delivery_mode":
			if n, ok := number(v); ok {
				p.DeliveryMode = uint8(n)
			}
		case "priority":
			if n, ok := number(v); ok {
				p.Priority = uint8(n)
			}
		case "content_type":
			p.ContentType = s
		case "content_encoding":
			p.ContentEncoding = s
		case "correlation_id":
			p.CorrelationId = s
		case "reply_to":
			p.ReplyTo = s
		case "expiration":
			p.Expiration = s
		case "message_id":
			p.MessageId = s
		case "type":
			p.Type = s
		case "user_id":
			p.UserId = s
		case "app_id":
			p.AppId = s
		}
	}
}
