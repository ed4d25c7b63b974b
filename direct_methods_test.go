package broker_test

import (
	"context"
	"reflect"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// amqp091Channel lists every exported method of *amqp091.Channel
// (amqp091-go v1.16.0): an application interface written over it is
// satisfied by *broker.Channel too. TestChannelMethodSet checks that the
// list is whole, so it fails when amqp091-go grows a method.
type amqp091Channel interface {
	Ack(tag uint64, multiple bool) error
	Cancel(consumer string, noWait bool) error
	Close() error
	Confirm(noWait bool) error
	Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error)
	ConsumeWithContext(ctx context.Context, queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error)
	ExchangeBind(destination, key, source string, noWait bool, args amqp091.Table) error
	ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error
	ExchangeDeclarePassive(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error
	ExchangeDelete(name string, ifUnused, noWait bool) error
	ExchangeUnbind(destination, key, source string, noWait bool, args amqp091.Table) error
	Flow(active bool) error
	Get(queue string, autoAck bool) (msg amqp091.Delivery, ok bool, err error)
	GetNextPublishSeqNo() uint64
	IsClosed() bool
	Nack(tag uint64, multiple, requeue bool) error
	NotifyCancel(c chan string) chan string
	NotifyClose(c chan *amqp091.Error) chan *amqp091.Error
	NotifyConfirm(ack, nack chan uint64) (chan uint64, chan uint64)
	NotifyFlow(c chan bool) chan bool
	NotifyPublish(confirm chan amqp091.Confirmation) chan amqp091.Confirmation
	NotifyRecoveryCancel(receiver chan struct{}) chan struct{}
	NotifyReturn(c chan amqp091.Return) chan amqp091.Return
	NotifyStateChange(c chan *amqp091.StateChanged)
	Publish(exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error
	PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error
	PublishWithDeferredConfirm(exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error)
	PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error)
	Qos(prefetchCount, prefetchSize int, global bool) error
	QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error
	QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error)
	QueueDeclarePassive(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error)
	QueueDelete(name string, ifUnused, ifEmpty, noWait bool) (int, error)
	QueueInspect(name string) (amqp091.Queue, error)
	QueuePurge(name string, noWait bool) (int, error)
	QueueUnbind(name, key, exchange string, args amqp091.Table) error
	Reconnect() error
	Recover(requeue bool) error
	Reject(tag uint64, requeue bool) error
	TopologyConfiguration(global bool) amqp091.TopologyConfiguration
	Tx() error
	TxCommit() error
	TxRollback() error
}

var (
	_ amqp091Channel = (*amqp091.Channel)(nil)
	_ amqp091Channel = (*broker.Channel)(nil)
)

// TestChannelMethodSet requires *broker.Channel to have every exported
// method of *amqp091.Channel with the identical signature, and
// amqp091Channel to list them all, by reflection over the amqp091-go in
// go.mod: a method amqp091-go adds fails here until the Channel has it.
func TestChannelMethodSet(t *testing.T) {
	theirs := reflect.TypeFor[*amqp091.Channel]()
	ours := reflect.TypeFor[*broker.Channel]()
	listed := reflect.TypeFor[amqp091Channel]()
	require.Positive(t, theirs.NumMethod())
	for m := range theirs.Methods() {
		t.Run(m.Name, func(t *testing.T) {
			got, ok := ours.MethodByName(m.Name)
			require.True(t, ok, "*broker.Channel has no %s%s", m.Name, signature(m.Type))
			require.Equal(t, signature(m.Type), signature(got.Type), "signature of %s", m.Name)
			_, ok = listed.MethodByName(m.Name)
			require.True(t, ok, "amqp091Channel does not list %s", m.Name)
		})
	}
	require.Equal(t, theirs.NumMethod(), listed.NumMethod(), "amqp091Channel lists a method *amqp091.Channel does not have")
}

// signature is a method type without its receiver, as a comparable value.
func signature(m reflect.Type) string {
	in := make([]reflect.Type, 0, m.NumIn()-1)
	for i := 1; i < m.NumIn(); i++ {
		in = append(in, m.In(i))
	}
	out := make([]reflect.Type, 0, m.NumOut())
	for i := range m.NumOut() {
		out = append(out, m.Out(i))
	}
	return reflect.FuncOf(in, out, m.IsVariadic()).String()
}
