package direct

import (
	"context"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqpconv"
)

// Publish is broker.Channel's Publish, documented there.
func (ch *Channel) Publish(exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	return ch.PublishWithContext(context.Background(), exchange, key, mandatory, immediate, msg)
}

// PublishWithContext is broker.Channel's PublishWithContext, documented there.
func (ch *Channel) PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	_, err := ch.publish(ctx, exchange, key, mandatory, immediate, &msg, false)
	return err
}

// PublishWithDeferredConfirm is broker.Channel's PublishWithDeferredConfirm, documented there.
func (ch *Channel) PublishWithDeferredConfirm(exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error) {
	return ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, mandatory, immediate, msg)
}

// PublishWithDeferredConfirmWithContext is broker.Channel's PublishWithDeferredConfirmWithContext, documented there.
func (ch *Channel) PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error) {
	return ch.publish(ctx, exchange, key, mandatory, immediate, &msg, true)
}

// GetNextPublishSeqNo is broker.Channel's GetNextPublishSeqNo, documented there.
func (ch *Channel) GetNextPublishSeqNo() uint64 { return ch.published.Load() + 1 }

// publish is the publishes' work; with deferred, in confirm mode it
// returns the publish's DeferredConfirmation.
func (ch *Channel) publish(ctx context.Context, exchange, key string, mandatory, immediate bool, msg *amqp091.Publishing, deferred bool) (*amqp091.DeferredConfirmation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// While a resource alarm is raised the publish waits here, before
	// sendMu, so Close is not held up by it (alarms.go).
	if err := ch.conn.WaitUnblocked(ctx); err != nil {
		return nil, err
	}
	if err := msg.Headers.Validate(); err != nil {
		return nil, err
	}
	if deferred && ch.confirming.Load() && !deferredUsable() {
		return nil, errDeferredUnusable
	}
	p := amqpconv.Properties(msg)
	// One allocation for both: the broker keeps them as the stored message.
	buf := make([]byte, 0, propertiesSize(&p)+len(msg.Body))
	buf = p.Append(buf)
	n := len(buf)
	buf = append(buf, msg.Body...)
	m := &amqp.BasicPublish{Exchange: exchange, RoutingKey: key, Mandatory: mandatory, Immediate: immediate}
	if !ch.confirming.Load() {
		return nil, ch.send(m, buf[:n:n], buf[n:])
	}
	// In confirm mode the sequence number is taken and the publish handed
	// to the session under pubMu, so that the number is the delivery tag
	// the broker gives it; its DeferredConfirmation is registered first,
	// as the confirm may come before send returns.
	ch.pubMu.Lock()
	defer ch.pubMu.Unlock()
	seq := ch.published.Add(1)
	var dc *amqp091.DeferredConfirmation
	if deferred {
		dc = newDeferred(seq)
		ch.mu.Lock()
		if ch.mu.deferred == nil {
			ch.mu.deferred = make(map[uint64]*amqp091.DeferredConfirmation)
		}
		ch.mu.deferred[seq] = dc
		ch.mu.Unlock()
	}
	if err := ch.send(m, buf[:n:n], buf[n:]); err != nil {
		// amqp091-go's unpublish: the number is given back and the
		// DeferredConfirmation done, not acked.
		ch.published.Add(^uint64(0))
		if dc != nil {
			ch.mu.Lock()
			_, pending := ch.mu.deferred[seq]
			delete(ch.mu.deferred, seq)
			ch.mu.Unlock()
			if pending {
				settleDeferred(dc, false)
			}
		}
		return nil, err
	}
	return dc, nil
}

// propertiesSize estimates the encoded size of p, so that one allocation
// usually holds properties and body.
func propertiesSize(p *amqp.Properties) int {
	n := 2 + 1 + 1 + 8
	for _, s := range [...]string{p.ContentType, p.ContentEncoding, p.CorrelationID, p.ReplyTo, p.Expiration, p.MessageID, p.Type, p.UserID, p.AppID, p.ClusterID} {
		if s != "" {
			n += 1 + len(s)
		}
	}
	if len(p.Headers) > 0 {
		n += 64 * len(p.Headers)
	}
	return n
}

// Ack is broker.Channel's Ack, documented there.
func (ch *Channel) Ack(tag uint64, multiple bool) error {
	return ch.send(&amqp.BasicAck{DeliveryTag: tag, Multiple: multiple}, nil, nil)
}

// Nack is broker.Channel's Nack, documented there.
func (ch *Channel) Nack(tag uint64, multiple, requeue bool) error {
	return ch.send(&amqp.BasicNack{DeliveryTag: tag, Multiple: multiple, Requeue: requeue}, nil, nil)
}

// Reject is broker.Channel's Reject, documented there.
func (ch *Channel) Reject(tag uint64, requeue bool) error {
	return ch.send(&amqp.BasicReject{DeliveryTag: tag, Requeue: requeue}, nil, nil)
}
