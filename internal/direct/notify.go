package direct

import (
	"fmt"
	"slices"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/session"
)

// channelSink is the Channel seen by its direct connection.
type channelSink Channel

var _ session.Sink = (*channelSink)(nil)

// Method is session.Sink's: a method the broker sent the direct
// connection. Confirms, a server-side basic.cancel and channel.close are
// handled here; any other method is the reply a synchronous call waits
// for.
func (s *channelSink) Method(channel uint16, m amqp.Method) {
	ch := (*Channel)(s)
	if channel != directChannel {
		return // connection.close-ok after closeConn
	}
	switch m := m.(type) {
	case *amqp.BasicAck:
		ch.confirmed(m.DeliveryTag, m.Multiple, true)
	case *amqp.BasicNack:
		ch.confirmed(m.DeliveryTag, m.Multiple, false)
	case *amqp.BasicCancel:
		ch.serverCancel(m.ConsumerTag)
	case *amqp.ChannelClose:
		ch.closedByBroker(&amqp091.Error{Code: int(m.ReplyCode), Reason: m.ReplyText, Server: true,
			Recover: !amqp.NewError(m.ReplyCode, 0, 0, "").Hard()})
	default:
		r := reply{class: m.ClassID(), method: m.MethodID()}
		switch m := m.(type) {
		case *amqp.QueueDeclareOk:
			r.name, r.count, r.consumers = m.Queue, m.MessageCount, m.ConsumerCount
		case *amqp.QueuePurgeOk:
			r.count = m.MessageCount
		case *amqp.QueueDeleteOk:
			r.count = m.MessageCount
		case *amqp.BasicConsumeOk:
			r.name = m.ConsumerTag
		case *amqp.BasicCancelOk:
			r.name = m.ConsumerTag
		}
		ch.reply(r)
	}
}

// Content is session.Sink's: a message the broker sent (basic.deliver,
// basic.get-ok or basic.return) with its encoded properties and body,
// copied out of the session's buffers before Content returns.
func (s *channelSink) Content(channel uint16, m amqp.Method, props, body []byte) {
	ch := (*Channel)(s)
	switch m := m.(type) {
	case *amqp.BasicDeliver:
		ch.mu.Lock()
		c := ch.mu.consumers[m.ConsumerTag]
		ch.mu.Unlock()
		if c == nil {
			return // cancelled with noWait while this was on its way
		}
		if !c.admitReply(len(props) + len(body)) {
			return // a requester that does not receive: the reply is dropped
		}
		r := newRawMessage(props, body)
		r.consumerTag = m.ConsumerTag
		r.deliveryTag = m.DeliveryTag
		r.redelivered = m.Redelivered
		r.exchange = m.Exchange
		r.routingKey = m.RoutingKey
		c.push(r)
	case *amqp.BasicGetOk:
		r := newRawMessage(props, body)
		r.deliveryTag = m.DeliveryTag
		r.redelivered = m.Redelivered
		r.exchange = m.Exchange
		r.routingKey = m.RoutingKey
		r.count = m.MessageCount
		ch.reply(reply{class: m.ClassID(), method: m.MethodID(), get: &r})
	case *amqp.BasicReturn:
		ch.mu.Lock()
		if len(ch.mu.returns) > 0 {
			r := newRawMessage(props, body)
			r.replyCode = m.ReplyCode
			r.replyText = m.ReplyText
			r.exchange = m.Exchange
			r.routingKey = m.RoutingKey
			ch.pushEventLocked(event{kind: eventReturn, ret: r})
		}
		ch.mu.Unlock()
	}
}

// Closed runs once the direct connection has ended: the Channel is closed
// for good, waiting calls and NotifyClose listeners learn why, and every
// goroutine of the Channel is told to stop.
func (s *channelSink) Closed(err *amqp.Error) {
	ch := (*Channel)(s)
	// Gone from the listings (Stats, Connections, the management API)
	// before NotifyClose fires, so whoever saw the close sees it gone; the
	// broker still waits for the Channel's goroutines through release.
	ch.forget()
	ch.mu.Lock()
	if !ch.mu.closed {
		ch.mu.closed = true
		if err != nil {
			ch.mu.closeErr = toError(err)
		}
	}
	ch.closed.Store(true)
	e := ch.mu.closeErr
	if ch.mu.waiting {
		r := reply{err: e}
		if e == nil {
			r.err = amqp091.ErrClosed
		}
		select {
		case ch.replies <- r:
		default:
		}
	}
	closes := ch.mu.closes
	ch.mu.closes = nil
	ch.mu.closesDone = true
	stopped := 0
	for _, c := range ch.mu.consumers {
		if c.stopWatch() {
			stopped++
		}
	}
	// amqp091-go's Channel.shutdown: the state goes to closed with the
	// broker's error wrapped, and publishes still waiting for a confirm
	// are nacked.
	var shutdown error
	if e != nil {
		shutdown = fmt.Errorf("channel shutdown error: %w", e)
	}
	ch.setStateLocked(amqp091.StateClosed, shutdown)
	cancels := ch.mu.recoveryCancels
	ch.mu.recoveryCancels = nil
	deferred := ch.mu.deferred
	ch.mu.deferred = nil
	ch.mu.Unlock()
	ch.connDone.Store(true)
	close(ch.quit)
	for _, c := range closes {
		if e != nil {
			select {
			case c <- e:
			default:
			}
		}
		close(c)
	}
	closeAll(cancels)
	for _, dc := range deferred {
		settleDeferred(dc, false)
	}
	ch.release(stopped + 1) // the watchers stopped, and the connection's reference
}

// reply hands a reply to the waiting call, if any.
func (ch *Channel) reply(r reply) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.mu.waiting {
		return
	}
	select {
	case ch.replies <- r:
	default:
	}
}

// closedByBroker records channel.close from the broker (a soft error).
func (ch *Channel) closedByBroker(e *amqp091.Error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.mu.closed {
		ch.mu.closed = true
		ch.mu.closeErr = e
	}
	ch.closed.Store(true)
	if ch.mu.waiting {
		select {
		case ch.replies <- reply{err: e}:
		default:
		}
	}
}

// NotifyClose is broker.Channel's NotifyClose, documented there.
func (ch *Channel) NotifyClose(c chan *amqp091.Error) chan *amqp091.Error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return registerLocked(&ch.mu.closes, ch.mu.closesDone, c)
}

// registerLocked appends c to *list and returns it, or closes it at once
// when the list was handled already (done).
func registerLocked[T any](list *[]chan T, done bool, c chan T) chan T {
	if done {
		close(c)
		return c
	}
	*list = append(*list, c)
	return c
}

// NotifyPublish is broker.Channel's NotifyPublish, documented there.
func (ch *Channel) NotifyPublish(c chan amqp091.Confirmation) chan amqp091.Confirmation {
	return addListener(ch, &ch.mu.confirms, c)
}

// NotifyConfirm is broker.Channel's NotifyConfirm, documented there.
func (ch *Channel) NotifyConfirm(ack, nack chan uint64) (chan uint64, chan uint64) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.startNotifierLocked() {
		closePair(confirmPair{ack, nack})
		return ack, nack
	}
	ch.mu.confirmPairs = append(ch.mu.confirmPairs, confirmPair{ack, nack})
	return ack, nack
}

func closePair(p confirmPair) {
	close(p.ack)
	if p.nack != p.ack {
		close(p.nack)
	}
}

// NotifyFlow is broker.Channel's NotifyFlow, documented there.
func (ch *Channel) NotifyFlow(c chan bool) chan bool {
	return addListener(ch, &ch.mu.flows, c)
}

// NotifyStateChange is broker.Channel's NotifyStateChange, documented there.
func (ch *Channel) NotifyStateChange(c chan *amqp091.StateChanged) {
	if c == nil {
		return
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if slices.Contains(ch.mu.states, c) {
		return
	}
	if !ch.startNotifierLocked() {
		close(c)
		return
	}
	ch.mu.states = append(ch.mu.states, c)
}

// setStateLocked moves the life-cycle state to to and tells the
// NotifyStateChange listeners.
func (ch *Channel) setStateLocked(to amqp091.LifeCycleState, err error) {
	from := ch.mu.state
	if from == to {
		return
	}
	ch.mu.state = to
	if len(ch.mu.states) > 0 {
		ch.pushEventLocked(event{kind: eventState, state: &amqp091.StateChanged{From: from, To: to, Err: err}})
	}
}

// NotifyRecoveryCancel is broker.Channel's NotifyRecoveryCancel, documented there.
func (ch *Channel) NotifyRecoveryCancel(receiver chan struct{}) chan struct{} {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return registerLocked(&ch.mu.recoveryCancels, ch.mu.closed, receiver)
}

// NotifyReturn is broker.Channel's NotifyReturn, documented there.
func (ch *Channel) NotifyReturn(c chan amqp091.Return) chan amqp091.Return {
	return addListener(ch, &ch.mu.returns, c)
}

// NotifyCancel is broker.Channel's NotifyCancel, documented there.
func (ch *Channel) NotifyCancel(c chan string) chan string {
	return addListener(ch, &ch.mu.cancels, c)
}

// addListener registers c on *list, served by the notifier goroutine; once
// the channel is closed c is closed at once instead. It returns c.
func addListener[T any](ch *Channel, list *[]chan T, c chan T) chan T {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.startNotifierLocked() {
		close(c)
		return c
	}
	*list = append(*list, c)
	return c
}

// startNotifierLocked starts the notifier goroutine on the first listener;
// it reports false once the channel is closed.
func (ch *Channel) startNotifierLocked() bool {
	if ch.mu.notifier {
		return !ch.mu.notifierDone
	}
	if !ch.acquireLocked() {
		return false
	}
	ch.mu.notifier = true
	go ch.notify()
	return true
}

func (ch *Channel) pushEventLocked(e event) {
	ch.mu.events = append(ch.mu.events, e)
	select {
	case ch.wake <- struct{}{}:
	default:
	}
}

// notify is the notifier goroutine: it hands queued events to the
// listeners in order, waiting for each receiver, until the connection ends;
// then it offers what is left to ready receivers and closes the listeners.
func (ch *Channel) notify() {
	defer ch.release(1)
	var batch []event
	closing := false
	for {
		ch.mu.Lock()
		batch, ch.mu.events = ch.mu.events, batch[:0]
		confirms, pairs, returns, cancels, states := ch.mu.confirms, ch.mu.confirmPairs, ch.mu.returns, ch.mu.cancels, ch.mu.states
		ch.mu.Unlock()
		if len(batch) == 0 {
			if closing {
				break
			}
			select {
			case <-ch.wake:
			case <-ch.quit:
				closing = true
			}
			continue
		}
		for i := range batch {
			e := &batch[i]
			switch e.kind {
			case eventConfirm:
				closing = offer(confirms, e.confirm, ch.quit, closing)
				for _, p := range pairs {
					to := p.nack
					if e.confirm.Ack {
						to = p.ack
					}
					closing = offerOne(to, e.confirm.DeliveryTag, ch.quit, closing)
				}
			case eventReturn:
				closing = offer(returns, ch.returned(&e.ret), ch.quit, closing)
			case eventCancel:
				closing = offer(cancels, e.tag, ch.quit, closing)
			case eventState:
				closing = offer(states, e.state, ch.quit, closing)
			}
			batch[i] = event{}
		}
	}
	ch.mu.Lock()
	confirms, pairs, returns, cancels := ch.mu.confirms, ch.mu.confirmPairs, ch.mu.returns, ch.mu.cancels
	flows, states := ch.mu.flows, ch.mu.states
	ch.mu.confirms, ch.mu.confirmPairs, ch.mu.returns, ch.mu.cancels = nil, nil, nil, nil
	ch.mu.flows, ch.mu.states = nil, nil
	ch.mu.notifierDone = true
	ch.mu.events = nil
	ch.mu.Unlock()
	closeAll(confirms)
	for _, p := range pairs {
		closePair(p)
	}
	closeAll(returns)
	closeAll(cancels)
	closeAll(flows)
	closeAll(states)
}

// offer sends v to every listener, waiting for each until quit is closed;
// once it is (or when closing already), only to ready receivers. It reports
// whether the channel is closing.
func offer[T any](listeners []chan T, v T, quit <-chan struct{}, closing bool) bool {
	for _, l := range listeners {
		closing = offerOne(l, v, quit, closing)
	}
	return closing
}

// offerOne is offer for one listener.
func offerOne[T any](l chan T, v T, quit <-chan struct{}, closing bool) bool {
	if !closing {
		select {
		case l <- v:
			return false
		case <-quit:
			closing = true
		}
	}
	select {
	case l <- v:
	default:
	}
	return closing
}

func closeAll[T any](cs []chan T) {
	for _, c := range cs {
		close(c)
	}
}

// confirmed turns the broker's basic.ack and basic.nack into one
// Confirmation per publish, in order (the broker coalesces with multiple).
func (ch *Channel) confirmed(tag uint64, multiple, ack bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.settleDeferredLocked(tag, multiple, ack)
	switch {
	case multiple:
		for ch.mu.confirmNext <= tag {
			ch.confirmLocked(ack)
		}
	case tag == ch.mu.confirmNext:
		ch.confirmLocked(ack)
	case tag > ch.mu.confirmNext:
		if ch.mu.confirmLate == nil {
			ch.mu.confirmLate = make(map[uint64]bool)
		}
		ch.mu.confirmLate[tag] = ack
	}
	for len(ch.mu.confirmLate) > 0 {
		ack, ok := ch.mu.confirmLate[ch.mu.confirmNext]
		if !ok {
			break
		}
		delete(ch.mu.confirmLate, ch.mu.confirmNext)
		ch.confirmLocked(ack)
	}
}

func (ch *Channel) confirmLocked(ack bool) {
	if len(ch.mu.confirms) > 0 || len(ch.mu.confirmPairs) > 0 {
		ch.pushEventLocked(event{kind: eventConfirm, confirm: amqp091.Confirmation{DeliveryTag: ch.mu.confirmNext, Ack: ack}})
	}
	ch.mu.confirmNext++
}

// serverCancel handles basic.cancel from the broker: the consumer's queue
// is gone.
func (ch *Channel) serverCancel(tag string) {
	ch.mu.Lock()
	stopped := 0
	if c := ch.mu.consumers[tag]; c != nil {
		if ch.endConsumerLocked(c) {
			stopped = 1
		}
	}
	if len(ch.mu.cancels) > 0 {
		ch.pushEventLocked(event{kind: eventCancel, tag: tag})
	}
	ch.mu.Unlock()
	ch.release(stopped)
}
