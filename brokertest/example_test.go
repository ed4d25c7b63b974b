package brokertest_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/clock"
)

// t stands for the *testing.T of the test each example is written in:
// the examples are compiled, not run.
var t *testing.T

func ExampleNewLab() {
	lab := brokertest.NewLab(t, broker.Options{})
	conn := lab.DialAMQP(t, "orders-service") // socket-free, named
	tcp, _ := amqp091.Dial(lab.URL())         // or over TCP
	_, _ = conn, tcp
}

func ExampleLab_Restart() {
	lab := brokertest.NewLab(t, broker.Options{})
	// ... declare durable queues, publish persistent messages ...
	_ = lab.Restart() // clients see 320 and reconnect to lab.URL()
	// durable queues and persistent messages are back; unacked ones redelivered
}

func ExampleLab_Crash() {
	lab := brokertest.NewLab(t, broker.Options{})
	// ... publish with confirms ...
	_ = lab.Crash() // kill -9: connections drop without connection.close
	// only what was confirmed survives; publishers must resend the rest
}

func ExampleLab_CloseConnections() {
	lab := brokertest.NewLab(t, broker.Options{})
	lab.DialAMQP(t, "consumer")
	// As RabbitMQ's management API: "CONNECTION_FORCED - Closed via management plugin".
	_, _ = lab.CloseConnections("consumer", brokertest.ConnectionForced, brokertest.ManagementCloseReason)
}

func ExampleLab_ForceConsumerTimeout() {
	lab := brokertest.NewLab(t, broker.Options{})
	lab.DialAMQP(t, "slow-worker")
	// Channel 1 is closed with 406 as by consumer_timeout; its deliveries come back redelivered.
	_ = lab.ForceConsumerTimeout("slow-worker", 1)
}

func ExampleLab_RaiseAlarm() {
	lab := brokertest.NewLab(t, broker.Options{})
	lab.RaiseAlarm(broker.AlarmMemory) // publishers get connection.blocked
	lab.ClearAlarm(broker.AlarmMemory) // and connection.unblocked
}

func ExampleLab_FailAppends() {
	lab := brokertest.NewLab(t, broker.Options{})
	lab.FailAppends(3) // the next 3 store appends fail: publishers get basic.nack
	lab.DiskFull()     // disk alarm, and every store write fails
	lab.DiskFreed()
}

func ExampleLab_HangStore() {
	lab := brokertest.NewLab(t, broker.Options{})
	hang := lab.HangStore(brokertest.StoreAppend) // the disk stalls
	// ... publish: no confirm arrives ...
	<-hang.Arrived()
	hang.Release()
}

func ExampleLink() {
	lab := brokertest.NewLab(t, broker.Options{})
	net := lab.NewLink("consumer")      // a network path of its own
	conn := net.DialAMQP(t, "consumer") // or amqp091.Dial(net.URL()) over TCP
	net.Latency(20 * time.Millisecond)  // each way
	net.Bandwidth(64 << 10)             // bytes per second
	_ = conn
}

func ExampleLink_Partition() {
	lab := brokertest.NewLab(t, broker.Options{})
	lab.Net().Partition() // bytes held both ways...
	lab.Net().Heal()      // ...and delivered now
	lab.Net().BlackHole() // bytes vanish; heartbeats must notice
	lab.Net().ResetAfter(1000)
}

func ExampleLab_WaitQueue() {
	lab := brokertest.NewLab(t, broker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = lab.WaitQueue(ctx, "orders", brokertest.Ready(3))
	_, _ = lab.WaitQueue(ctx, "orders", func(s brokertest.QueueState) bool { return s.Unacked == 0 && s.Consumers == 1 })
}

func ExampleLab_Advance() {
	lab := brokertest.NewLab(t, broker.Options{Clock: clock.NewFake(time.Now())})
	// ... publish to a queue with x-message-ttl 60000 ...
	lab.Advance(time.Minute) // expired: age == TTL is enough, no WaitIdle needed
}

func ExampleLab_Reset() {
	lab := brokertest.NewLab(t, broker.Options{})
	t.Run("one", func(t *testing.T) { _ = lab.Reset() /* a fresh broker, same address */ })
	t.Run("two", func(t *testing.T) { _ = lab.Reset() })
}
