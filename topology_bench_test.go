package broker_test

import (
	"strconv"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// BenchmarkTopologyDeclareBind measures declaration throughput over TCP
// with amqp091-go: one op is a queue.declare and a queue.bind to a topic
// exchange, each waiting for its reply. Every batch of queues is deleted
// off the clock, so the vhost holds up to batch queues and memory stays
// bounded however large b.N grows. The routing cost of many bindings is
// measured in routing/ (BenchmarkRoute*); this is the cost of the methods
// end to end. B/op and allocs/op count the client's allocations too (same
// process), and the queue actor each declaration starts.
//
// durable on Pebble pays two synced writes per op (queue, then binding);
// transient on Pebble writes the metadata unsynced; memory writes nothing.
func BenchmarkTopologyDeclareBind(b *testing.B) {
	for _, bc := range []struct {
		name    string
		pebble  bool
		durable bool
	}{
		{name: "memory"},
		{name: "pebble/transient", pebble: true},
		{name: "pebble/durable", pebble: true, durable: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var opts broker.Options
			if bc.pebble {
				opts.DataDir = b.TempDir()
			}
			br, err := broker.New(opts)
			require.NoError(b, err)
			b.Cleanup(func() { require.NoError(b, br.Close()) })
			_, err = br.Listen("127.0.0.1:0")
			require.NoError(b, err)
			conn, err := amqp091.Dial(br.URL())
			require.NoError(b, err)
			b.Cleanup(func() { _ = conn.Close() })
			ch := amqptest.Channel(b, conn)
			require.NoError(b, ch.ExchangeDeclare("bench", "topic", bc.durable, false, false, false, nil))

			const batch = 1000
			names := make([]string, 0, batch)
			deleteBatch := func() {
				for _, name := range names {
					if _, err := ch.QueueDelete(name, false, false, false); err != nil {
						b.Fatal(err)
					}
				}
				names = names[:0]
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				name := "q." + strconv.Itoa(i)
				if _, err := ch.QueueDeclare(name, bc.durable, false, false, false, nil); err != nil {
					b.Fatal(err)
				}
				if err := ch.QueueBind(name, "stock."+strconv.Itoa(i)+".#", "bench", false, nil); err != nil {
					b.Fatal(err)
				}
				if names = append(names, name); len(names) == batch {
					b.StopTimer()
					deleteBatch()
					b.StartTimer()
				}
			}
			b.StopTimer()
			deleteBatch()
		})
	}
}
