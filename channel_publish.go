package broker

import (
	"context"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqpconv"
)

// Publish is PublishWithContext without a context.
func (ch *Channel) Publish(exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	return ch.PublishWithContext(context.Background(), exchange, key, mandatory, immediate, msg)
}

// PublishWithContext publishes msg to exchange with routing key key. The
// properties and body are copied: msg may be reused when it returns. While
// a resource alarm is raised (Broker.RaiseAlarm, Options.MemoryHighWatermark)
// it waits for the alarm to clear, or returns ctx's error without
// publishing. In confirm mode the publish is confirmed through
// NotifyPublish; unroutable mandatory messages come back through
// NotifyReturn. An error the broker answers the publish with (404 for a
// missing exchange, 406 for an oversized body, ...) is returned, and closes
// the channel.
func (ch *Channel) PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// While a resource alarm is raised the publish waits here, before
	// sendMu, so Close is not held up by it (alarms.go).
	if err := ch.conn.WaitUnblocked(ctx); err != nil {
		return err
	}
	if err := msg.Headers.Validate(); err != nil {
		return err
	}
	p := amqpconv.Properties(&msg)
	// One allocation for both: the broker keeps them as the stored message.
	buf := make([]byte, 0, propertiesSize(&p)+len(msg.Body))
	buf = p.Append(buf)
	n := len(buf)
	buf = append(buf, msg.Body...)
	return ch.send(&amqp.BasicPublish{Exchange: exchange, RoutingKey: key, Mandatory: mandatory, Immediate: immediate}, buf[:n:n], buf[n:])
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

// Ack acknowledges delivery tag (with multiple: every delivery up to it).
// An unknown tag is 406 PRECONDITION_FAILED, returned and closing the
// channel.
func (ch *Channel) Ack(tag uint64, multiple bool) error {
	return ch.send(&amqp.BasicAck{DeliveryTag: tag, Multiple: multiple}, nil, nil)
}

// Nack rejects delivery tag (with multiple: every delivery up to it),
// requeueing it in place or dead-lettering/discarding it.
func (ch *Channel) Nack(tag uint64, multiple, requeue bool) error {
	return ch.send(&amqp.BasicNack{DeliveryTag: tag, Multiple: multiple, Requeue: requeue}, nil, nil)
}

// Reject rejects one delivery, requeueing it in place or
// dead-lettering/discarding it.
func (ch *Channel) Reject(tag uint64, requeue bool) error {
	return ch.send(&amqp.BasicReject{DeliveryTag: tag, Requeue: requeue}, nil, nil)
}
