package direct

import (
	"context"
	"fmt"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqpconv"
)

// Confirm is broker.Channel's Confirm, documented there.
func (ch *Channel) Confirm(noWait bool) error {
	if _, err := ch.call(context.Background(), &amqp.ConfirmSelect{Nowait: noWait}, !noWait, amqp.MethodConfirmSelectOk); err != nil {
		return err
	}
	ch.confirming.Store(true)
	return nil
}

// Flow is broker.Channel's Flow, documented there.
func (ch *Channel) Flow(active bool) error {
	_, err := ch.call(context.Background(), &amqp.ChannelFlow{Active: active}, true, amqp.MethodChannelFlowOk)
	return err
}

// Qos is broker.Channel's Qos, documented there.
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

// Recover is broker.Channel's Recover, documented there.
func (ch *Channel) Recover(requeue bool) error {
	_, err := ch.call(context.Background(), &amqp.BasicRecover{Requeue: requeue}, true, amqp.MethodBasicRecoverOk)
	return err
}

// Tx is broker.Channel's Tx, documented there.
func (ch *Channel) Tx() error {
	_, err := ch.call(context.Background(), &amqp.TxSelect{}, true, amqp.MethodTxSelectOk)
	return err
}

// TxCommit is broker.Channel's TxCommit, documented there.
func (ch *Channel) TxCommit() error {
	_, err := ch.call(context.Background(), &amqp.TxCommit{}, true, amqp.MethodTxCommitOk)
	return err
}

// TxRollback is broker.Channel's TxRollback, documented there.
func (ch *Channel) TxRollback() error {
	_, err := ch.call(context.Background(), &amqp.TxRollback{}, true, amqp.MethodTxRollbackOk)
	return err
}

// ExchangeDeclare is broker.Channel's ExchangeDeclare, documented there.
func (ch *Channel) ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	return ch.exchangeDeclare(name, kind, false, durable, autoDelete, internal, noWait, args)
}

// ExchangeDeclarePassive is broker.Channel's ExchangeDeclarePassive, documented there.
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

// ExchangeDelete is broker.Channel's ExchangeDelete, documented there.
func (ch *Channel) ExchangeDelete(name string, ifUnused, noWait bool) error {
	_, err := ch.call(context.Background(), &amqp.ExchangeDelete{Exchange: name, IfUnused: ifUnused, NoWait: noWait}, !noWait, amqp.MethodExchangeDeleteOk)
	return err
}

// ExchangeBind is broker.Channel's ExchangeBind, documented there.
func (ch *Channel) ExchangeBind(destination, key, source string, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.ExchangeBind{
		Destination: destination, Source: source, RoutingKey: key, NoWait: noWait, Arguments: amqpconv.ToTable(args),
	}, !noWait, amqp.MethodExchangeBindOk)
	return err
}

// ExchangeUnbind is broker.Channel's ExchangeUnbind, documented there.
func (ch *Channel) ExchangeUnbind(destination, key, source string, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.ExchangeUnbind{
		Destination: destination, Source: source, RoutingKey: key, NoWait: noWait, Arguments: amqpconv.ToTable(args),
	}, !noWait, amqp.MethodExchangeUnbindOk)
	return err
}

// QueueDeclare is broker.Channel's QueueDeclare, documented there.
func (ch *Channel) QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	return ch.queueDeclare(name, false, durable, autoDelete, exclusive, noWait, args)
}

// QueueDeclarePassive is broker.Channel's QueueDeclarePassive, documented there.
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

// QueueInspect is broker.Channel's QueueInspect, documented there.
func (ch *Channel) QueueInspect(name string) (amqp091.Queue, error) {
	q, err := ch.queueDeclare(name, true, false, false, false, false, nil)
	if err != nil {
		return amqp091.Queue{Name: name}, err
	}
	return q, nil
}

// QueueBind is broker.Channel's QueueBind, documented there.
func (ch *Channel) QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.QueueBind{
		Queue: name, Exchange: exchange, RoutingKey: key, NoWait: noWait, Arguments: amqpconv.ToTable(args),
	}, !noWait, amqp.MethodQueueBindOk)
	return err
}

// QueueUnbind is broker.Channel's QueueUnbind, documented there.
func (ch *Channel) QueueUnbind(name, key, exchange string, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.QueueUnbind{
		Queue: name, Exchange: exchange, RoutingKey: key, Arguments: amqpconv.ToTable(args),
	}, true, amqp.MethodQueueUnbindOk)
	return err
}

// QueuePurge is broker.Channel's QueuePurge, documented there.
func (ch *Channel) QueuePurge(name string, noWait bool) (int, error) {
	r, err := ch.call(context.Background(), &amqp.QueuePurge{Queue: name, NoWait: noWait}, !noWait, amqp.MethodQueuePurgeOk)
	return int(r.count), err
}

// QueueDelete is broker.Channel's QueueDelete, documented there.
func (ch *Channel) QueueDelete(name string, ifUnused, ifEmpty, noWait bool) (int, error) {
	r, err := ch.call(context.Background(), &amqp.QueueDelete{Queue: name, IfUnused: ifUnused, IfEmpty: ifEmpty, NoWait: noWait}, !noWait, amqp.MethodQueueDeleteOk)
	return int(r.count), err
}
