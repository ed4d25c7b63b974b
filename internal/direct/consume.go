package direct

import (
	"context"
	"fmt"
	"sync/atomic"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqpconv"
)

// Get is broker.Channel's Get, documented there.
func (ch *Channel) Get(queue string, autoAck bool) (msg amqp091.Delivery, ok bool, err error) {
	r, err := ch.call(context.Background(), &amqp.BasicGet{Queue: queue, NoAck: autoAck}, true, amqp.MethodBasicGetOk, amqp.MethodBasicGetEmpty)
	if err != nil || r.get == nil {
		return amqp091.Delivery{}, false, err
	}
	return ch.delivery(r.get), true, nil
}

// Consume is broker.Channel's Consume, documented there.
func (ch *Channel) Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error) {
	return ch.ConsumeWithContext(context.Background(), queue, consumer, autoAck, exclusive, noLocal, noWait, args)
}

// consumerSeq numbers generated consumer tags.
var consumerSeq atomic.Uint64

// ConsumeWithContext is broker.Channel's ConsumeWithContext, documented there.
func (ch *Channel) ConsumeWithContext(ctx context.Context, queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error) {
	if err := args.Validate(); err != nil {
		return nil, err
	}
	if consumer == "" {
		consumer = fmt.Sprintf("ctag-warren-direct-%d", consumerSeq.Add(1))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Registered before basic.consume: the first delivery may reach the sink
	// before the call returns.
	c := &consumerBuf{tag: consumer, out: make(chan amqp091.Delivery), wake: make(chan struct{}, 1)}
	if queue == replyToQueue {
		c.replies = ch.heldReplies
	}
	ch.mu.Lock()
	dup := ch.mu.consumers[consumer] != nil
	if !dup {
		if !ch.acquireLocked() {
			ch.mu.Unlock()
			return nil, amqp091.ErrClosed
		}
		ch.mu.consumers[consumer] = c
		go ch.pump(c)
	}
	ch.mu.Unlock()

	_, err := ch.call(ctx, &amqp.BasicConsume{
		Queue:       queue,
		ConsumerTag: consumer,
		NoLocal:     noLocal,
		NoAck:       autoAck,
		Exclusive:   exclusive,
		NoWait:      noWait,
		Arguments:   amqpconv.ToTable(args),
	}, !noWait, amqp.MethodBasicConsumeOk)
	if dup && err == nil {
		// The broker refuses a reused tag, so this is not reached; do not
		// hand out a channel nobody feeds.
		return nil, amqp091.ErrClosed
	}
	if err != nil {
		if !dup {
			ch.endConsumer(c)
		}
		return nil, err
	}
	if ctx.Done() != nil {
		ch.mu.Lock()
		if ch.mu.consumers[consumer] == c && ch.acquireLocked() {
			c.stop = context.AfterFunc(ctx, func() {
				defer ch.release(1)
				_ = ch.Cancel(consumer, false)
			})
		}
		ch.mu.Unlock()
	}
	return c.out, nil
}

// Cancel is broker.Channel's Cancel, documented there.
func (ch *Channel) Cancel(consumer string, noWait bool) error {
	if _, err := ch.call(context.Background(), &amqp.BasicCancel{ConsumerTag: consumer, NoWait: noWait}, !noWait, amqp.MethodBasicCancelOk); err != nil {
		return err
	}
	ch.mu.Lock()
	c := ch.mu.consumers[consumer]
	ch.mu.Unlock()
	if c != nil {
		ch.endConsumer(c)
	}
	return nil
}

// replyToQueue is the pseudo-queue a direct reply-to requester consumes.
const replyToQueue = "amq.rabbitmq.reply-to"

// MaxHeldReplies bounds the bytes of replies a direct reply-to consumer
// holds for an application that does not receive them, as a TCP
// requester's outbox bounds them (512 KiB): past it a reply is dropped,
// as RabbitMQ drops what a requester cannot take. A single reply larger
// than that still goes alone.
const MaxHeldReplies = 512 << 10

// admitReply reports whether a reply consumer takes a reply of n bytes,
// and counts them if so; other consumers take everything.
func (c *consumerBuf) admitReply(n int) bool {
	if c.replies == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || c.closed || c.held > 0 && c.held+int64(n) > MaxHeldReplies {
		return false
	}
	c.held += int64(n)
	c.replies.Add(int64(n))
	return true
}

// handedOver stops counting a reply of n bytes the application received
// (or that was dropped with the consumer).
func (c *consumerBuf) handedOver(n int) {
	if c.replies == nil {
		return
	}
	c.mu.Lock()
	c.held -= int64(n)
	c.replies.Add(-int64(n))
	c.mu.Unlock()
}

func (c *consumerBuf) push(r rawMessage) {
	c.mu.Lock()
	if c.ended || c.closed {
		if c.replies != nil {
			c.held -= int64(len(r.raw))
			c.replies.Add(-int64(len(r.raw)))
		}
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// stopWatch stops the context watcher and reports whether it will never
// run (so its reference is the caller's to release). Under Channel.mu.
func (c *consumerBuf) stopWatch() bool {
	if c.stop == nil {
		return false
	}
	stopped := c.stop()
	c.stop = nil
	return stopped
}

// endConsumer forgets c; its pump drains and closes the delivery channel.
func (ch *Channel) endConsumer(c *consumerBuf) {
	ch.mu.Lock()
	stopped := 0
	if ch.endConsumerLocked(c) {
		stopped = 1
	}
	ch.mu.Unlock()
	ch.release(stopped)
}

// endConsumerLocked reports whether a watcher reference is to be released.
func (ch *Channel) endConsumerLocked(c *consumerBuf) bool {
	if ch.mu.consumers[c.tag] == c {
		delete(ch.mu.consumers, c.tag)
	}
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return c.stopWatch()
}

// pump is a consumer's goroutine: it decodes deliveries and hands them to
// the application in order, until the consumer ends (then it drains) or
// the connection ends (then it drops: the broker requeued them).
func (ch *Channel) pump(c *consumerBuf) {
	defer ch.release(1)
	defer close(c.out)
	defer func() {
		c.mu.Lock()
		c.closed = true
		c.queue = nil
		c.replies.Add(-c.held) // what was never received
		c.held = 0
		c.mu.Unlock()
	}()
	var batch []rawMessage
	for {
		c.mu.Lock()
		batch, c.queue = c.queue, batch[:0]
		ended := c.ended
		c.mu.Unlock()
		if len(batch) == 0 {
			if ended {
				return
			}
			select {
			case <-c.wake:
				continue
			case <-ch.quit:
				return
			}
		}
		for i := range batch {
			d := ch.delivery(&batch[i])
			n := len(batch[i].raw)
			batch[i] = rawMessage{}
			select {
			case c.out <- d:
				c.handedOver(n)
			case <-ch.quit:
				return
			}
		}
	}
}

// delivery decodes a message for the application. Properties were checked
// when the message was published; should a stored message's not decode, it
// is delivered with the properties that did.
func (ch *Channel) delivery(r *rawMessage) amqp091.Delivery {
	p, _ := amqp.DecodeProperties(r.raw[:r.propsLen])
	d := amqpconv.Delivery(&p)
	d.Acknowledger = ch
	d.ConsumerTag = r.consumerTag
	d.MessageCount = r.count
	d.DeliveryTag = r.deliveryTag
	d.Redelivered = r.redelivered
	d.Exchange = r.exchange
	d.RoutingKey = r.routingKey
	d.Body = r.raw[r.propsLen:len(r.raw):len(r.raw)]
	return d
}

// returned decodes a basic.return for NotifyReturn listeners, as delivery
// does a delivery.
func (ch *Channel) returned(r *rawMessage) amqp091.Return {
	p, _ := amqp.DecodeProperties(r.raw[:r.propsLen])
	ret := amqpconv.Return(&p)
	ret.ReplyCode = r.replyCode
	ret.ReplyText = r.replyText
	ret.Exchange = r.exchange
	ret.RoutingKey = r.routingKey
	ret.Body = r.raw[r.propsLen:len(r.raw):len(r.raw)]
	return ret
}
