package session

import (
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/vhost"
)

// Direct reply-to, as RabbitMQ documents it (behaviour and texts of
// RabbitMQ 3.13/4.x rabbit_channel): a requester consumes from the
// pseudo-queue amq.rabbitmq.reply-to in no-ack mode, and each request it
// publishes on that channel with reply_to = amq.rabbitmq.reply-to leaves
// with reply_to rewritten to the channel's own generated name
// (amq.rabbitmq.reply-to.<token>, vhost.AddReplyReceiver). A reply
// published to that name through the default exchange goes straight to the
// consumer, with no queue in between: at most once, dropped when the
// requester's connection cannot take it. See doc.go for the error cases.

// replyConsumer is a channel's direct reply-to consumer (at most one per
// channel, as in RabbitMQ); it is the vhost's ReplyReceiver for name.
type replyConsumer struct {
	ch   *Channel
	tag  string
	name string
	// gone: cancelled or the channel closed; under the delivery lock.
	gone bool
}

// DeliverReply implements vhost.ReplyReceiver: it sends one reply as a
// basic.deliver on the requester's channel, with the next delivery tag and
// nothing to acknowledge. It runs on the responder's reader goroutine.
func (r *replyConsumer) DeliverReply(routingKey string, props, body []byte) bool {
	ch := r.ch
	d := &ch.dl
	d.Lock()
	defer d.Unlock()
	if d.closed || r.gone {
		return false
	}
	if !ch.conn.hasRoom(nil) {
		// The requester does not read: there is no queue to buffer the
		// reply in, so it is dropped, as RabbitMQ's volatile queue drops
		// what its requester cannot take. It still counts as routed.
		return true
	}
	d.nextTag++
	d.deliver = amqp.BasicDeliver{
		ConsumerTag: r.tag,
		DeliveryTag: d.nextTag,
		RoutingKey:  routingKey,
	}
	ch.conn.sendReply(ch.id, &d.deliver, props, body)
	return true
}

// consumeReply is basic.consume on amq.rabbitmq.reply-to: no permission
// check and no queue, as in RabbitMQ; the checks and texts are RabbitMQ's.
func (ch *Channel) consumeReply(m *amqp.BasicConsume) error {
	tag := m.ConsumerTag
	if tag == "" {
		tag = vhost.GenerateName("amq.ctag-")
	}
	d := &ch.dl
	d.Lock()
	defer d.Unlock()
	if _, dup := d.consumers[tag]; dup || (d.reply != nil && d.reply.tag == tag) {
		return amqp.NewError(amqp.NotAllowed, m.ClassID(), m.MethodID(), "attempt to reuse consumer tag '%s'", tag)
	}
	if !m.NoAck {
		return amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "reply consumer cannot acknowledge")
	}
	if d.reply != nil {
		return amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "reply consumer already set")
	}
	if d.closed {
		return nil // the channel is closing: nothing goes out any more
	}
	r := &replyConsumer{ch: ch, tag: tag}
	r.name = ch.conn.vh.AddReplyReceiver(r)
	d.reply = r
	if !m.NoWait {
		ch.sendLocked(&amqp.BasicConsumeOk{ConsumerTag: tag})
	}
	return nil
}

// cancelReply ends the channel's reply consumer if tag is its tag (or any
// tag when all is set, for the channel's close), and reports whether it
// did. Replies to its name are unroutable from then on.
func (ch *Channel) cancelReply(tag string, all bool) bool {
	d := &ch.dl
	d.Lock()
	r := d.reply
	if r == nil || (!all && r.tag != tag) {
		d.Unlock()
		return false
	}
	r.gone = true
	d.reply = nil
	d.Unlock()
	ch.conn.vh.RemoveReplyReceiver(r.name)
	return true
}

// replyName is the generated name of the channel's reply consumer, "" when
// it has none.
func (ch *Channel) replyName() string {
	ch.dl.Lock()
	defer ch.dl.Unlock()
	if ch.dl.reply == nil {
		return ""
	}
	return ch.dl.reply.name
}

// propsReplyTo is the reply-to bit of the property flags (the first two
// bytes of the raw properties, AMQP 0-9-1 basic class, bit 9).
const propsReplyTo = 0x0200

// rewriteReplyTo returns the properties of a publish on this channel with
// reply_to = amq.rabbitmq.reply-to rewritten to the channel's reply name,
// and props unchanged for every other publish (which costs a look at the
// flags only). Without a reply consumer it is RabbitMQ's 406 "fast reply
// consumer does not exist".
func (ch *Channel) rewriteReplyTo(m *amqp.BasicPublish, props []byte) ([]byte, error) {
	if len(props) < 2 || (int(props[0])<<8|int(props[1]))&propsReplyTo == 0 {
		return props, nil
	}
	p, err := amqp.DecodeProperties(props)
	if err != nil {
		return nil, err
	}
	if p.ReplyTo != vhost.ReplyQueue {
		return props, nil
	}
	name := ch.replyName()
	if name == "" {
		return nil, amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "fast reply consumer does not exist")
	}
	p.ReplyTo = name
	return p.Append(nil), nil
}

// publishReply delivers a publish to the default exchange whose routing key
// is a generated reply name. A reply whose requester is gone is unroutable
// (returned when mandatory); one that reached its requester is routed. The
// reply is handed over at once, also inside a transaction, as RabbitMQ
// does (it delivers replies while routing).
//
// A name another cluster node generated goes to that node
// (vhost.ForwardReply). Only a mandatory reply whose return depends on it
// (before the 4.2 profile) waits for that node's answer, a bounded time,
// and is returned when none came; every other one is handed over without
// waiting, and its confirm follows at once, as RabbitMQ 3.13 confirms a
// reply as soon as it is routed (its rabbit_exchange:route hands a reply
// to the requester's channel process, on whatever node, without waiting).
func (ch *Channel) publishReply(m *amqp.BasicPublish, props, body []byte, sum amqp.PropertySummary) {
	// From 4.2 a reply name is a queue to routing: a mandatory reply is
	// routed whether or not its requester is still there.
	mandatoryRouted := m.Mandatory && ch.conn.set.profile.ReplyToMandatoryRouted
	var delivered bool
	if r, ok := ch.conn.vh.ReplyReceiver(m.RoutingKey); ok {
		delivered = r.DeliverReply(m.RoutingKey, props, body)
	} else {
		delivered = ch.conn.vh.ForwardReply(m.RoutingKey, props, body, m.Mandatory && !mandatoryRouted)
	}
	routed := delivered || mandatoryRouted
	n := 0
	if routed {
		n = 1
	}
	ch.conn.cfg.Counters.published(n, m.Mandatory)
	if !routed && m.Mandatory {
		ch.returnMessage(m, record(m, props, body, sum))
	}
	if ch.confirm != nil && ch.tx == nil {
		ch.confirm.stored(ch, ch.confirm.publish(0), false)
	}
}

// declareReply answers queue.declare of the pseudo-queue or of a generated
// name as RabbitMQ does, passive or not: declare-ok with no messages and
// one consumer while its requester consumes, else 404. Another cluster
// node's name is asked of that node (vhost.ReplyExists).
func (ch *Channel) declareReply(m *amqp.QueueDeclare) error {
	if m.Queue != vhost.ReplyQueue && !ch.conn.vh.ReplyExists(m.Queue) {
		return queueGone(m.Queue, ch.conn.vh.Name())
	}
	if !m.NoWait {
		ch.send(&amqp.QueueDeclareOk{Queue: m.Queue, MessageCount: 0, ConsumerCount: 1})
	}
	return nil
}
