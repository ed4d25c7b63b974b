package session

import (
	"errors"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
)

// streamConsume checks a basic.consume on a stream the way RabbitMQ 4.x
// does (rabbit_stream_queue:consume): a consumer prefetch is required
// (406), automatic acknowledgement is refused (540), and so is a
// channel-wide (global) prefetch (540); then the x-stream-* arguments are
// read (queue.ParseStreamConsume).
func (ch *Channel) streamConsume(q *vhost.Queue, m *amqp.BasicConsume) (*queue.StreamConsume, error) {
	res := "queue '" + q.Def.Name + "' in vhost '" + ch.conn.vh.Name() + "'"
	switch {
	case ch.prefetch == 0:
		return nil, amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "consumer prefetch count is not set for stream %s", res)
	case m.NoAck:
		return nil, amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "automatic acknowledgement not supported by stream %s", res)
	case ch.credit.Limit() > 0:
		return nil, amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "%s does not support global qos", res)
	}
	sc, err := queue.ParseStreamConsume(m.Arguments)
	if err != nil {
		var ae *queue.ArgError
		if errors.As(err, &ae) {
			return nil, amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "invalid arg '%s' for %s: %s", ae.Arg, res, ae.Reason)
		}
		return nil, err
	}
	if m.ConsumerTag == "" {
		// Offsets are tracked per consumer tag: a generated one never
		// comes back, so there is nothing to track (LavinMQ requires a
		// tag of the client's own).
		sc.Track = false
	}
	return &sc, nil
}

// streamRefusal is the answer to an operation a stream does not support
// (queue.ErrNotSupported): 540 NOT_IMPLEMENTED in RabbitMQ 4.x's words
// for basic.get and queue.purge.
func streamRefusal(m amqp.Method, q *vhost.Queue, vh string) error {
	res := "queue '" + q.Def.Name + "' in vhost '" + vh + "'"
	if _, ok := m.(*amqp.BasicGet); ok {
		return amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "basic.get not supported by stream queues %s", res)
	}
	return amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "%s not supported by %s", m.Name(), res)
}
