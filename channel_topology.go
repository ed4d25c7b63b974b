package broker

import (
	"context"
	"fmt"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqpconv"
)

// Confirm puts the channel in confirm mode: every later publish is
// confirmed through NotifyPublish, NotifyConfirm and its
// DeferredConfirmation once every queue it reached has stored it (synced
// to disk when persistent and durable).
func (ch *Channel) Confirm(noWait bool) error {
	if _, err := ch.call(context.Background(), &amqp.ConfirmSelect{Nowait: noWait}, !noWait, amqp.MethodConfirmSelectOk); err != nil {
		return err
	}
	ch.confirming.Store(true)
	return nil
}

// Flow asks the broker to pause (false) or resume (true) deliveries to the
// channel's consumers. Like RabbitMQ, the broker refuses to pause: Flow(false)
// fails with 540 NOT_IMPLEMENTED, which closes the Channel; Flow(true) is
// accepted. Use Qos or Cancel to hold deliveries back.
func (ch *Channel) Flow(active bool) error {
	_, err := ch.call(context.Background(), &amqp.ChannelFlow{Active: active}, true, amqp.MethodChannelFlowOk)
	return err
}

// Qos limits unacknowledged deliveries: per consumer created afterwards
// (global false) or for the whole channel (global true), RabbitMQ's reading.
// prefetchSize must be 0 (the broker answers 540 otherwise, as RabbitMQ
// does).
func (ch *Channel) Qos(prefetchCount, prefetchSize int, global bool) error {
	if prefetchCount < 0 || prefetchSize < 0 {
		return fmt.Errorf("amqp: Qos values must be non-negative (got prefetchCount=%d, prefetchSize=%d)", prefetchCount, prefetchSize)
	}
	_, err := ch.call(context.Background(), &amqp.BasicQos{
		PrefetchCount: uint16(prefetchCount),
		PrefetchSize:  uint32(prefetchSize),
		Global:        global,
	}, true, amqp.MethodBasicQosOk)
	return err
}

// Recover requeues every unacknowledged delivery of the channel
// (requeue=false is not supported, as in RabbitMQ: 540 NOT_IMPLEMENTED).
func (ch *Channel) Recover(requeue bool) error {
	_, err := ch.call(context.Background(), &amqp.BasicRecover{Requeue: requeue}, true, amqp.MethodBasicRecoverOk)
	return err
}

// Tx puts the channel in transaction mode.
func (ch *Channel) Tx() error {
	_, err := ch.call(context.Background(), &amqp.TxSelect{}, true, amqp.MethodTxSelectOk)
	return err
}

// TxCommit applies the transaction's publishes and acknowledgements; it
// returns once the published messages are stored.
func (ch *Channel) TxCommit() error {
	_, err := ch.call(context.Background(), &amqp.TxCommit{}, true, amqp.MethodTxCommitOk)
	return err
}

// TxRollback discards the transaction's publishes and acknowledgements.
func (ch *Channel) TxRollback() error {
	_, err := ch.call(context.Background(), &amqp.TxRollback{}, true, amqp.MethodTxRollbackOk)
	return err
}

// ExchangeDeclare declares an exchange, or checks that an existing one has
// the same kind and flags (406 PRECONDITION_FAILED otherwise).
func (ch *Channel) ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	return ch.exchangeDeclare(name, kind, false, durable, autoDelete, internal, noWait, args)
}

// ExchangeDeclarePassive checks that an exchange exists (404 NOT_FOUND
// otherwise).
func (ch *Channel) ExchangeDeclarePassive(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	return ch.exchangeDeclare(name, kind, true, durable, autoDelete, internal, noWait, args)
}

func (ch *Channel) exchangeDeclare(name, kind string, passive, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.ExchangeDeclare{
		Exchange:   name,
		Type:       kind,
		Passive:    passive,
		Durable:    durable,
		AutoDelete: autoDelete,
		Internal:   internal,
		NoWait:     noWait,
		Arguments:  amqpconv.ToTable(args),
	}, !noWait, amqp.MethodExchangeDeclareOk)
	return err
}

// ExchangeDelete deletes an exchange and its bindings.
func (ch *Channel) ExchangeDelete(name string, ifUnused, noWait bool) error {
	_, err := ch.call(context.Background(), &amqp.ExchangeDelete{Exchange: name, IfUnused: ifUnused, NoWait: noWait}, !noWait, amqp.MethodExchangeDeleteOk)
	return err
}

// ExchangeBind binds exchange destination to exchange source with key.
func (ch *Channel) ExchangeBind(destination, key, source string, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.ExchangeBind{
		Destination: destination, Source: source, RoutingKey: key, NoWait: noWait, Arguments: amqpconv.ToTable(args),
	}, !noWait, amqp.MethodExchangeBindOk)
	return err
}

// ExchangeUnbind removes a binding made by ExchangeBind.
func (ch *Channel) ExchangeUnbind(destination, key, source string, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.ExchangeUnbind{
		Destination: destination, Source: source, RoutingKey: key, NoWait: noWait, Arguments: amqpconv.ToTable(args),
	}, !noWait, amqp.MethodExchangeUnbindOk)
	return err
}

// QueueDeclare declares a queue ("" asks the broker for a name), or checks
// that an existing one is equivalent (406 PRECONDITION_FAILED otherwise).
func (ch *Channel) QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	return ch.queueDeclare(name, false, durable, autoDelete, exclusive, noWait, args)
}

// QueueDeclarePassive returns the state of an existing queue (404
// NOT_FOUND if there is none).
func (ch *Channel) QueueDeclarePassive(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	return ch.queueDeclare(name, true, durable, autoDelete, exclusive, noWait, args)
}

func (ch *Channel) queueDeclare(name string, passive, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	if err := args.Validate(); err != nil {
		return amqp091.Queue{}, err
	}
	r, err := ch.call(context.Background(), &amqp.QueueDeclare{
		Queue:      name,
		Passive:    passive,
		Durable:    durable,
		AutoDelete: autoDelete,
		Exclusive:  exclusive,
		NoWait:     noWait,
		Arguments:  amqpconv.ToTable(args),
	}, !noWait, amqp.MethodQueueDeclareOk)
	if err != nil {
		return amqp091.Queue{}, err
	}
	if noWait {
		return amqp091.Queue{Name: name}, nil
	}
	return amqp091.Queue{Name: r.name, Messages: int(r.count), Consumers: int(r.consumers)}, nil
}

// QueueInspect is QueueDeclarePassive without its flags, amqp091-go's
// deprecated form: the state of an existing queue (404 NOT_FOUND, closing
// the channel, if there is none). On error the Queue still carries name,
// as in amqp091-go.
func (ch *Channel) QueueInspect(name string) (amqp091.Queue, error) {
	q, err := ch.queueDeclare(name, true, false, false, false, false, nil)
	if err != nil {
		return amqp091.Queue{Name: name}, err
	}
	return q, nil
}

// QueueBind binds queue name to exchange with key.
func (ch *Channel) QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.QueueBind{
		Queue: name, Exchange: exchange, RoutingKey: key, NoWait: noWait, Arguments: amqpconv.ToTable(args),
	}, !noWait, amqp.MethodQueueBindOk)
	return err
}

// QueueUnbind removes a binding made by QueueBind.
func (ch *Channel) QueueUnbind(name, key, exchange string, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.QueueUnbind{
		Queue: name, Exchange: exchange, RoutingKey: key, Arguments: amqpconv.ToTable(args),
	}, true, amqp.MethodQueueUnbindOk)
	return err
}

// QueuePurge removes the queue's ready messages (not the unacknowledged
// ones) and returns how many.
func (ch *Channel) QueuePurge(name string, noWait bool) (int, error) {
	r, err := ch.call(context.Background(), &amqp.QueuePurge{Queue: name, NoWait: noWait}, !noWait, amqp.MethodQueuePurgeOk)
	return int(r.count), err
}

// QueueDelete deletes a queue and returns how many messages it held.
func (ch *Channel) QueueDelete(name string, ifUnused, ifEmpty, noWait bool) (int, error) {
	r, err := ch.call(context.Background(), &amqp.QueueDelete{Queue: name, IfUnused: ifUnused, IfEmpty: ifEmpty, NoWait: noWait}, !noWait, amqp.MethodQueueDeleteOk)
	return int(r.count), err
}
