package session

import (
	"context"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/compat"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/routing"
)

// handleExchange implements the exchange class (§1.6 of the spec, plus
// RabbitMQ's exchange.bind and exchange.unbind).
func (ch *Channel) handleExchange(ctx context.Context, m amqp.Method) error {
	vh := ch.conn.vh
	switch m := m.(type) {
	case *amqp.ExchangeDeclare:
		m.Exchange = routing.StripCRLF(m.Exchange)
		if !m.Passive {
			if err := ch.conn.check(permConfigure, "exchange", m.Exchange, m); err != nil {
				return err
			}
		} else if m.Exchange != "" { // the default exchange is refused first (403)
			if err := ch.checkPassive("exchange", m.Exchange, m); err != nil {
				return err
			}
		}
		if err := vh.DeclareExchange(ctx, m); err != nil {
			return err
		}
		if !m.NoWait {
			ch.send(&amqp.ExchangeDeclareOk{})
		}
	case *amqp.ExchangeDelete:
		m.Exchange = routing.StripCRLF(m.Exchange)
		if err := ch.conn.check(permConfigure, "exchange", m.Exchange, m); err != nil {
			return err
		}
		if err := vh.DeleteExchange(ctx, m.Exchange, m.IfUnused); err != nil {
			return err
		}
		if !m.NoWait {
			ch.send(&amqp.ExchangeDeleteOk{})
		}
	case *amqp.ExchangeBind:
		m.Source, m.Destination = routing.StripCRLF(m.Source), routing.StripCRLF(m.Destination)
		b := routing.Binding{Source: m.Source, Destination: routing.Destination{Name: m.Destination, Exchange: true}, Key: m.RoutingKey, Args: m.Arguments}
		if err := ch.checkBind(b, m); err != nil {
			return err
		}
		if err := vh.Bind(ctx, ch.conn.id, b); err != nil {
			return err
		}
		if !m.NoWait {
			ch.send(&amqp.ExchangeBindOk{})
		}
	case *amqp.ExchangeUnbind:
		m.Source, m.Destination = routing.StripCRLF(m.Source), routing.StripCRLF(m.Destination)
		b := routing.Binding{Source: m.Source, Destination: routing.Destination{Name: m.Destination, Exchange: true}, Key: m.RoutingKey, Args: m.Arguments}
		if err := ch.checkBind(b, m); err != nil {
			return err
		}
		if err := vh.Unbind(ctx, ch.conn.id, b); err != nil {
			return err
		}
		if !m.NoWait {
			ch.send(&amqp.ExchangeUnbindOk{})
		}
	default:
		return serverOnly(m)
	}
	return nil
}

// queueName expands "" to the channel's most recently declared queue, as
// RabbitMQ does for every queue method.
func (ch *Channel) queueName(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if ch.lastQueue == "" {
		return "", amqp.NewError(amqp.NotFound, 0, 0, "no previously declared queue")
	}
	return ch.lastQueue, nil
}

// handleQueue implements the queue class.
func (ch *Channel) handleQueue(ctx context.Context, m amqp.Method) error {
	vh := ch.conn.vh
	switch m := m.(type) {
	case *amqp.QueueDeclare:
		// The name as sent picks the last-queue shortcut and the
		// reply-to pseudo-queue; then CR and LF go (routing.StripCRLF),
		// and a name that was nothing else asks for a server-named
		// queue, as in RabbitMQ.
		if m.Passive && m.Queue == "" {
			name, err := ch.queueName("")
			if err != nil {
				return err
			}
			m.Queue = name
		}
		reply := m.Queue == vhost.ReplyQueue || vhost.IsReplyName(m.Queue)
		m.Queue = routing.StripCRLF(m.Queue)
		if reply {
			return ch.declareReply(m)
		}
		if m.Passive {
			if err := ch.checkPassive("queue", m.Queue, m); err != nil {
				return err
			}
		}
		if !m.Passive {
			// A server-named queue is checked under a name of the shape
			// the vhost will generate (amq.gen-...), as RabbitMQ checks
			// the generated name.
			name := m.Queue
			if name == "" {
				name = vhost.GenerateName("amq.gen-")
			}
			if err := ch.conn.check(permConfigure, "queue", name, m); err != nil {
				return err
			}
		}
		q, created, err := vh.DeclareQueueCreated(ctx, ch.conn.id, m)
		if err != nil {
			return err
		}
		ch.lastQueue = q.Def.Name
		if m.NoWait {
			return nil
		}
		// A queue this declare created is empty and has no consumer: its
		// counts say so without waking its actor.
		st := q.Counts()
		if !created {
			if st, err = q.Stats(ctx); err != nil {
				return queueGone(q.Def.Name, vh.Name())
			}
		}
		ch.send(&amqp.QueueDeclareOk{Queue: q.Def.Name, MessageCount: clamp32(st.Ready), ConsumerCount: uint32(st.Consumers)})
	case *amqp.QueueBind:
		name, err := ch.queueName(m.Queue)
		if err != nil {
			return err
		}
		key := m.RoutingKey
		if key == "" && m.Queue == "" {
			key = name // RabbitMQ's routing-key shortcut
		}
		name, m.Exchange = routing.StripCRLF(name), routing.StripCRLF(m.Exchange)
		b := routing.Binding{Source: m.Exchange, Destination: routing.Destination{Name: name}, Key: key, Args: m.Arguments}
		if err := ch.checkBind(b, m); err != nil {
			return err
		}
		if err := vh.Bind(ctx, ch.conn.id, b); err != nil {
			return err
		}
		if !m.NoWait {
			ch.send(&amqp.QueueBindOk{})
		}
	case *amqp.QueueUnbind:
		name, err := ch.queueName(m.Queue)
		if err != nil {
			return err
		}
		key := m.RoutingKey
		if key == "" && m.Queue == "" {
			key = name
		}
		name, m.Exchange = routing.StripCRLF(name), routing.StripCRLF(m.Exchange)
		b := routing.Binding{Source: m.Exchange, Destination: routing.Destination{Name: name}, Key: key, Args: m.Arguments}
		if err := ch.checkBind(b, m); err != nil {
			return err
		}
		if err := vh.Unbind(ctx, ch.conn.id, b); err != nil {
			return err
		}
		ch.send(&amqp.QueueUnbindOk{})
	case *amqp.QueuePurge:
		name, err := ch.queueName(m.Queue)
		if err != nil {
			return err
		}
		if err := ch.conn.check(permRead, "queue", name, m); err != nil {
			return err
		}
		q, err := vh.Queue(ch.conn.id, name)
		if err != nil {
			return err
		}
		if q.IsStream() {
			return streamRefusal(m, q, vh.Name())
		}
		n, err := q.Purge(ctx)
		if err != nil {
			return queueGone(name, vh.Name())
		}
		if !m.NoWait {
			ch.send(&amqp.QueuePurgeOk{MessageCount: clamp32(n)})
		}
	case *amqp.QueueDelete:
		name, err := ch.queueName(m.Queue)
		if err != nil {
			return err
		}
		name = routing.StripCRLF(name)
		if err := ch.conn.check(permConfigure, "queue", name, m); err != nil {
			return err
		}
		n, err := vh.DeleteQueue(ctx, ch.conn.id, name, m.IfUnused, m.IfEmpty)
		if err != nil {
			return err
		}
		if !m.NoWait {
			ch.send(&amqp.QueueDeleteOk{MessageCount: clamp32(n)})
		}
	default:
		return serverOnly(m)
	}
	return nil
}

// checkPassive applies the profile's rule for a passive declare of the
// named exchange or queue (compat.PassivePermission): none up to 4.2.5,
// configure in 4.2.6 and 4.3.0, any of read, write and configure from
// 4.2.7 and 4.3.1, refused as configure is when the user has none
// (rabbit_channel's check_any_resource_access_permitted tries configure
// last so that the refusal reads as a declare's).
func (ch *Channel) checkPassive(resource, name string, m amqp.Method) error {
	c := ch.conn
	switch c.set.profile.PassiveDeclare {
	case compat.PassiveConfigure:
		return c.check(permConfigure, resource, name, m)
	case compat.PassiveAny:
		if c.check(permRead, resource, name, m) == nil || c.check(permWrite, resource, name, m) == nil {
			return nil
		}
		return c.check(permConfigure, resource, name, m)
	}
	return nil
}

func queueGone(name, vhost string) error {
	return amqp.NewError(amqp.NotFound, 0, 0, "no queue '%s' in vhost '%s'", name, vhost)
}

func serverOnly(m amqp.Method) error {
	return amqp.NewError(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "%s is sent by the server only", m.Name())
}

func clamp32(n uint64) uint32 {
	return uint32(min(n, 1<<32-1))
}

// checkBind checks a bind or unbind as RabbitMQ's binding_action does: write
// on the destination, read on the source exchange, then the topic
// permission on the binding key when the source is a topic exchange.
func (ch *Channel) checkBind(b routing.Binding, m amqp.Method) error {
	kind := "queue"
	if b.Destination.Exchange {
		kind = "exchange"
	}
	if err := ch.conn.check(permWrite, kind, b.Destination.Name, m); err != nil {
		return err
	}
	if err := ch.conn.check(permRead, "exchange", b.Source, m); err != nil {
		return err
	}
	return ch.conn.checkTopic(permRead, b.Source, b.Key, m)
}
