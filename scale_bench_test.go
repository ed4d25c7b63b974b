package broker_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/measure"
)

// BenchmarkQueueLifecycle measures declare, bind and delete of durable
// queues on Pebble through a direct channel, one step per sub-benchmark,
// the other steps off the clock: b.N queues exist at once, so ns/op at a
// large -benchtime (10000x) against a small one (1000x) shows whether a
// step's cost grows with the number of queues (deleting used to: each
// delete left a range deletion every later read re-fragmented). allocs/op
// guards what one declaration or deletion allocates. Durable steps wait
// for an fsync each, which dominates ns/op on most disks.
func BenchmarkQueueLifecycle(b *testing.B) {
	for _, step := range []string{"declare", "bind", "delete"} {
		b.Run(step, func(b *testing.B) {
			br := brokertest.NewUnstarted(b, broker.Options{DataDir: b.TempDir()})
			ch := brokertest.Channel(b, br)
			names := make([]string, b.N)
			for i := range names {
				names[i] = "q" + strconv.Itoa(i)
			}
			run := func(timed string, f func(name string) error) {
				if step == timed {
					b.ReportAllocs()
					b.ResetTimer()
				}
				for _, name := range names {
					if err := f(name); err != nil {
						b.Fatal(err)
					}
				}
				if step == timed {
					b.StopTimer()
				}
			}
			run("declare", func(name string) error {
				_, err := ch.QueueDeclare(name, true, false, false, false, nil)
				return err
			})
			run("bind", func(name string) error {
				return ch.QueueBind(name, name, "amq.direct", false, nil)
			})
			run("delete", func(name string) error {
				_, err := ch.QueueDelete(name, false, false, false)
				return err
			})
		})
	}
}

// BenchmarkIdleQueueHeap reports the live heap (runtime/metrics, after
// two collections) that an idle durable queue on Pebble holding one
// persistent message costs, as heap-B/queue: the actor, the vhost's and
// the routing table's records, the shard's and the cursor's state, the
// held record. b.N queues exist at once. goroutines/queue and
// stack-B/queue are what the queues keep of goroutines once idle: 0, as
// each queue's actor goroutine exits when it has nothing to do (the
// benchmark waits for that, up to a second).
func BenchmarkIdleQueueHeap(b *testing.B) {
	br := brokertest.NewUnstarted(b, broker.Options{DataDir: b.TempDir()})
	ch := brokertest.Channel(b, br)
	ctx := context.Background()
	msg := amqp091.Publishing{Body: []byte("x"), DeliveryMode: amqp091.Persistent}
	declare := func(name string) {
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			b.Fatal(err)
		}
		if err := ch.PublishWithContext(ctx, "", name, false, false, msg); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 10 { // first-use allocations
		declare("warm" + strconv.Itoa(i))
	}
	waitGoroutines(b, 0)
	base, baseStacks, baseG := measure.LiveHeap(), measure.Stacks(), runtime.NumGoroutine()
	for i := range b.N {
		declare("q" + strconv.Itoa(i))
	}
	br.Stats() // asks every actor: the publishes were handled
	b.StopTimer()
	waitGoroutines(b, baseG)
	b.ReportMetric(float64(measure.LiveHeap()-base)/float64(b.N), "heap-B/queue")
	b.ReportMetric(float64(measure.Stacks()-baseStacks)/float64(b.N), "stack-B/queue")
	b.ReportMetric(float64(runtime.NumGoroutine()-baseG)/float64(b.N), "goroutines/queue")
}

// waitGoroutines waits up to 5 s for the goroutine count to come down to
// n (0: to stop falling), so that idle queues' actors have exited.
func waitGoroutines(b *testing.B, n int) {
	deadline := time.Now().Add(5 * time.Second)
	last := runtime.NumGoroutine()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		g := runtime.NumGoroutine()
		if n > 0 && g <= n || n == 0 && g == last {
			return
		}
		last = g
	}
}

// BenchmarkQueuePurge purges durable queues on Pebble holding one
// message each (transient, so no fsync hides the purge's own cost), through a direct channel, among `others`
// such queues (declared by a definitions import, a message published
// to each): one op purges a queue and publishes its message back, round
// robin. ns/op must not grow with the number of other queues (compare
// others=1000 with others=50000).
func BenchmarkQueuePurge(b *testing.B) {
	for _, others := range []int{1000, 50000} {
		b.Run("others="+strconv.Itoa(others), func(b *testing.B) {
			br := brokertest.NewUnstarted(b, broker.Options{DataDir: b.TempDir()})
			ch := brokertest.Channel(b, br)
			ctx := context.Background()
			names := make([]string, others)
			d := &definitions.File{}
			for i := range names {
				names[i] = "q" + strconv.Itoa(i)
				d.Queues = append(d.Queues, definitions.Queue{Name: names[i], VHost: "/", Durable: true})
			}
			if err := br.Admin().Import(ctx, d); err != nil {
				b.Fatal(err)
			}
			msg := amqp091.Publishing{Body: []byte("x")}
			publish := func(name string) {
				if err := ch.PublishWithContext(ctx, "", name, false, false, msg); err != nil {
					b.Fatal(err)
				}
			}
			for _, name := range names {
				publish(name)
			}
			br.Stats() // asks every actor: the publishes were handled
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				name := names[i%others]
				n, err := ch.QueuePurge(name, false)
				if err != nil || n != 1 {
					b.Fatal(n, err)
				}
				publish(name)
			}
		})
	}
}
