package broker

import (
	"context"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/direct"
)

// Channel is an AMQP channel served in-process, without frames or a socket.
// It has every method of *amqp091.Channel (github.com/rabbitmq/amqp091-go
// v1.16), with the same names and signatures and its types (its
// DeferredConfirmation included), so an application interface over them is
// satisfied by both; each method runs the broker's session code exactly as
// a frame from a TCP client would. Errors are *amqp091.Error with the reply
// code the wire would carry.
//
// Each Channel is its own direct connection with one channel. So exclusive
// queues declared on a Channel belong to it and are deleted when it closes,
// for whatever reason (a channel error included), and basic.qos global
// applies to the Channel, as it does in RabbitMQ.
//
// Differences from amqp091-go, all where in-process calls can do better
// than the network:
//   - A method the broker answers with a channel or connection exception
//     returns that error even when amqp091-go could only report it later:
//     PublishWithContext, Ack, Nack, Reject and the noWait variants. The
//     error is also sent to NotifyClose listeners, and every later call
//     returns amqp091.ErrClosed, as in amqp091-go.
//   - Notifications (NotifyPublish, NotifyConfirm, NotifyReturn,
//     NotifyCancel, NotifyStateChange) are delivered by a goroutine of the
//     Channel, in order, waiting for a slow receiver as long as it takes
//     without holding up the broker. When the Channel closes, what is
//     queued is handed only to receivers that are ready, then the listener
//     channels are closed.
//   - A Channel has no automatic recovery, as an amqp091-go connection
//     dialled without Config.Recovery: Reconnect returns ErrClosed and
//     TopologyConfiguration records nothing (internal/direct/recovery.go).
//   - The error sent to NotifyClose listeners is delivered only to a
//     receiver that is ready (a buffered channel, as amqp091-go recommends);
//     then the listener channels are closed.
//
// All methods are safe for concurrent use. Synchronous methods run one at a
// time, like amqp091-go's RPCs.
//
// The implementation is internal/direct's; this type forwards to it, so
// that the methods are documented here.
type Channel struct{ c *direct.Channel }

// toError converts the session's error into the *amqp091.Error the direct
// API returns, as amqp091-go builds it from channel.close or
// connection.close.
func toError(e *amqp.Error) *amqp091.Error { return direct.Error(e) }

// IsClosed reports whether the channel is closed (by Close or by the
// broker).
func (ch *Channel) IsClosed() bool {
	return ch.c.IsClosed()
}

// Close closes the channel: its consumers are cancelled, its unacked
// deliveries requeued, its exclusive queues deleted, and deliveries not yet
// received from consumer channels dropped (the broker requeued them). It
// returns once every goroutine of the Channel has exited. It is safe to call
// many times; after the first it returns nil.
func (ch *Channel) Close() error {
	return ch.c.Close()
}

// Get takes one message from queue; ok is false when it is empty.
func (ch *Channel) Get(queue string, autoAck bool) (msg amqp091.Delivery, ok bool, err error) {
	return ch.c.Get(queue, autoAck)
}

// Consume is ConsumeWithContext without a context.
func (ch *Channel) Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error) {
	return ch.c.Consume(queue, consumer, autoAck, exclusive, noLocal, noWait, args)
}

// ConsumeWithContext starts a consumer on queue and returns its deliveries.
// consumer "" generates a tag. The delivery channel is buffered without
// bound (the queue never waits for the application; prefetch via Qos is
// what limits unacknowledged deliveries) and is closed when the consumer is
// cancelled (by Cancel, by ctx, or by the broker because the queue was
// deleted: after what was already delivered) or the channel closes (what
// was not yet received is dropped; the broker requeues it).
func (ch *Channel) ConsumeWithContext(ctx context.Context, queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error) {
	return ch.c.ConsumeWithContext(ctx, queue, consumer, autoAck, exclusive, noLocal, noWait, args)
}

// Cancel stops consumer: its delivery channel is closed once the
// deliveries already made to it are received. Its unacknowledged
// deliveries stay unacknowledged (basic.cancel requeues nothing).
func (ch *Channel) Cancel(consumer string, noWait bool) error {
	return ch.c.Cancel(consumer, noWait)
}

// NotifyClose registers a listener for the error that closes the channel:
// a channel exception, or a connection exception of the broker (320
// CONNECTION_FORCED when the broker closes). The error is sent only if the
// listener is ready to receive it (give it a buffered channel); then c is
// closed, also on a graceful Close. c is returned.
func (ch *Channel) NotifyClose(c chan *amqp091.Error) chan *amqp091.Error {
	return ch.c.NotifyClose(c)
}

// NotifyPublish registers a listener for publisher confirms (after
// Confirm): one Confirmation per publish, in publish order, starting with
// DeliveryTag 1. c is closed when the channel closes and returned.
func (ch *Channel) NotifyPublish(c chan amqp091.Confirmation) chan amqp091.Confirmation {
	return ch.c.NotifyPublish(c)
}

// NotifyConfirm registers a pair of listeners for publisher confirms (after
// Confirm): the sequence number of each publish goes to ack when the broker
// acked it and to nack when it nacked it, in publish order, as amqp091-go's
// NotifyConfirm forwards NotifyPublish. ack and nack may be the same
// channel. Both are closed when the channel closes (once if they are the
// same) and returned.
func (ch *Channel) NotifyConfirm(ack, nack chan uint64) (chan uint64, chan uint64) {
	return ch.c.NotifyConfirm(ack, nack)
}

// NotifyFlow registers a listener for channel.flow from the broker. The
// broker never sends it: like RabbitMQ, it blocks publishing connections
// (connection.blocked, and a publish on a Channel waits) instead, so c
// receives nothing; it is closed when the channel closes and returned.
func (ch *Channel) NotifyFlow(c chan bool) chan bool {
	return ch.c.NotifyFlow(c)
}

// NotifyStateChange registers a listener for the Channel's life-cycle
// transitions, as amqp091-go's does: open to closing when Close starts,
// then to closed when it is done, or open to closed, with Err wrapping the
// *amqp091.Error, when the broker closes the channel or the broker shuts
// down. A Channel never reconnects, so StateReconnecting never comes. c is
// closed after the transition to closed, and at once when the channel is
// already closing; a nil c or one registered already is ignored. The
// transitions are delivered in order, waiting for a slow receiver while the
// channel is open; the last ones reach only a ready receiver (give it a
// buffer of 2).
func (ch *Channel) NotifyStateChange(c chan *amqp091.StateChanged) {
	ch.c.NotifyStateChange(c)
}

// NotifyRecoveryCancel registers receiver, which is closed when the
// channel starts closing (Close, or the broker closing it), or at once
// when it is closing already; it is returned. In amqp091-go it tells of a
// recovery cut short by Close; a Channel has no recovery (see Reconnect),
// so closing is all there is to tell.
func (ch *Channel) NotifyRecoveryCancel(receiver chan struct{}) chan struct{} {
	return ch.c.NotifyRecoveryCancel(receiver)
}

// NotifyReturn registers a listener for mandatory publishes the broker
// could not route (basic.return). c is closed when the channel closes and
// returned.
func (ch *Channel) NotifyReturn(c chan amqp091.Return) chan amqp091.Return {
	return ch.c.NotifyReturn(c)
}

// NotifyCancel registers a listener for consumers the broker cancelled
// (their queue was deleted); it receives the consumer tag. c is closed when
// the channel closes and returned.
func (ch *Channel) NotifyCancel(c chan string) chan string {
	return ch.c.NotifyCancel(c)
}

// Publish is PublishWithContext without a context.
func (ch *Channel) Publish(exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	return ch.c.Publish(exchange, key, mandatory, immediate, msg)
}

// PublishWithContext publishes msg to exchange with routing key key. The
// properties and body are copied: msg may be reused when it returns. While
// a resource alarm is raised (brokertest.RaiseAlarm, Options.MemoryHighWatermark)
// it waits for the alarm to clear, or returns ctx's error without
// publishing. In confirm mode the publish is confirmed through
// NotifyPublish; unroutable mandatory messages come back through
// NotifyReturn. An error the broker answers the publish with (404 for a
// missing exchange, 406 for an oversized body, ...) is returned, and closes
// the channel.
func (ch *Channel) PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	return ch.c.PublishWithContext(ctx, exchange, key, mandatory, immediate, msg)
}

// PublishWithDeferredConfirm is PublishWithDeferredConfirmWithContext
// without a context.
func (ch *Channel) PublishWithDeferredConfirm(exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error) {
	return ch.c.PublishWithDeferredConfirm(exchange, key, mandatory, immediate, msg)
}

// PublishWithDeferredConfirmWithContext is PublishWithContext that, in
// confirm mode, also returns the publish's DeferredConfirmation: its
// DeliveryTag is the publish's sequence number, and it is done when the
// broker confirmed the publish (Acked true) or nacked it, or when the
// channel closed first (Acked false), as in amqp091-go. Outside confirm
// mode it returns nil. It is amqp091-go's own type, filled in by the
// Channel (internal/direct/deferred.go says how).
func (ch *Channel) PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error) {
	return ch.c.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, immediate, msg)
}

// GetNextPublishSeqNo returns the sequence number the next publish will
// have in confirm mode (the DeliveryTag of its Confirmation): 1 before the
// first, and 1 for as long as the channel is not in confirm mode, as in
// amqp091-go.
func (ch *Channel) GetNextPublishSeqNo() uint64 {
	return ch.c.GetNextPublishSeqNo()
}

// Ack acknowledges delivery tag (with multiple: every delivery up to it).
// An unknown tag is 406 PRECONDITION_FAILED, returned and closing the
// channel.
func (ch *Channel) Ack(tag uint64, multiple bool) error {
	return ch.c.Ack(tag, multiple)
}

// Nack rejects delivery tag (with multiple: every delivery up to it),
// requeueing it in place or dead-lettering/discarding it.
func (ch *Channel) Nack(tag uint64, multiple, requeue bool) error {
	return ch.c.Nack(tag, multiple, requeue)
}

// Reject rejects one delivery, requeueing it in place or
// dead-lettering/discarding it.
func (ch *Channel) Reject(tag uint64, requeue bool) error {
	return ch.c.Reject(tag, requeue)
}

// Reconnect returns amqp091.ErrClosed, as amqp091-go's Reconnect does when
// recovery is not enabled: a Channel is never reopened.
func (ch *Channel) Reconnect() error {
	return ch.c.Reconnect()
}

// TopologyConfiguration returns what amqp091-go's returns without recovery
// enabled, which records nothing: no QoS, no exchanges, queues or
// bindings (empty maps), whatever global says.
func (ch *Channel) TopologyConfiguration(global bool) amqp091.TopologyConfiguration {
	return ch.c.TopologyConfiguration(global)
}

// Confirm puts the channel in confirm mode: every later publish is
// confirmed through NotifyPublish, NotifyConfirm and its
// DeferredConfirmation once every queue it reached has stored it (synced
// to disk when persistent and durable).
func (ch *Channel) Confirm(noWait bool) error {
	return ch.c.Confirm(noWait)
}

// Flow asks the broker to pause (false) or resume (true) deliveries to the
// channel's consumers. Like RabbitMQ, the broker refuses to pause: Flow(false)
// fails with 540 NOT_IMPLEMENTED, which closes the Channel; Flow(true) is
// accepted. Use Qos or Cancel to hold deliveries back.
func (ch *Channel) Flow(active bool) error {
	return ch.c.Flow(active)
}

// Qos limits unacknowledged deliveries: per consumer created afterwards
// (global false) or for the whole channel (global true), RabbitMQ's reading.
// prefetchSize must be 0 (the broker answers 540 otherwise, as RabbitMQ
// does).
func (ch *Channel) Qos(prefetchCount, prefetchSize int, global bool) error {
	return ch.c.Qos(prefetchCount, prefetchSize, global)
}

// Recover requeues every unacknowledged delivery of the channel
// (requeue=false is not supported, as in RabbitMQ: 540 NOT_IMPLEMENTED).
func (ch *Channel) Recover(requeue bool) error {
	return ch.c.Recover(requeue)
}

// Tx puts the channel in transaction mode.
func (ch *Channel) Tx() error {
	return ch.c.Tx()
}

// TxCommit applies the transaction's publishes and acknowledgements; it
// returns once the published messages are stored.
func (ch *Channel) TxCommit() error {
	return ch.c.TxCommit()
}

// TxRollback discards the transaction's publishes and acknowledgements.
func (ch *Channel) TxRollback() error {
	return ch.c.TxRollback()
}

// ExchangeDeclare declares an exchange, or checks that an existing one has
// the same kind and flags (406 PRECONDITION_FAILED otherwise).
func (ch *Channel) ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	return ch.c.ExchangeDeclare(name, kind, durable, autoDelete, internal, noWait, args)
}

// ExchangeDeclarePassive checks that an exchange exists (404 NOT_FOUND
// otherwise).
func (ch *Channel) ExchangeDeclarePassive(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	return ch.c.ExchangeDeclarePassive(name, kind, durable, autoDelete, internal, noWait, args)
}

// ExchangeDelete deletes an exchange and its bindings.
func (ch *Channel) ExchangeDelete(name string, ifUnused, noWait bool) error {
	return ch.c.ExchangeDelete(name, ifUnused, noWait)
}

// ExchangeBind binds exchange destination to exchange source with key.
func (ch *Channel) ExchangeBind(destination, key, source string, noWait bool, args amqp091.Table) error {
	return ch.c.ExchangeBind(destination, key, source, noWait, args)
}

// ExchangeUnbind removes a binding made by ExchangeBind.
func (ch *Channel) ExchangeUnbind(destination, key, source string, noWait bool, args amqp091.Table) error {
	return ch.c.ExchangeUnbind(destination, key, source, noWait, args)
}

// QueueDeclare declares a queue ("" asks the broker for a name), or checks
// that an existing one is equivalent (406 PRECONDITION_FAILED otherwise).
func (ch *Channel) QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	return ch.c.QueueDeclare(name, durable, autoDelete, exclusive, noWait, args)
}

// QueueDeclarePassive returns the state of an existing queue (404
// NOT_FOUND if there is none).
func (ch *Channel) QueueDeclarePassive(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	return ch.c.QueueDeclarePassive(name, durable, autoDelete, exclusive, noWait, args)
}

// QueueInspect is QueueDeclarePassive without its flags, amqp091-go's
// deprecated form: the state of an existing queue (404 NOT_FOUND, closing
// the channel, if there is none). On error the Queue still carries name,
// as in amqp091-go.
func (ch *Channel) QueueInspect(name string) (amqp091.Queue, error) {
	return ch.c.QueueInspect(name)
}

// QueueBind binds queue name to exchange with key.
func (ch *Channel) QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error {
	return ch.c.QueueBind(name, key, exchange, noWait, args)
}

// QueueUnbind removes a binding made by QueueBind.
func (ch *Channel) QueueUnbind(name, key, exchange string, args amqp091.Table) error {
	return ch.c.QueueUnbind(name, key, exchange, args)
}

// QueuePurge removes the queue's ready messages (not the unacknowledged
// ones) and returns how many.
func (ch *Channel) QueuePurge(name string, noWait bool) (int, error) {
	return ch.c.QueuePurge(name, noWait)
}

// QueueDelete deletes a queue and returns how many messages it held.
func (ch *Channel) QueueDelete(name string, ifUnused, ifEmpty, noWait bool) (int, error) {
	return ch.c.QueueDelete(name, ifUnused, ifEmpty, noWait)
}
