package queue

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/warrenmq/broker/internal/measure"
	"github.com/warrenmq/broker/storage"
)

// BenchmarkQueueStartDelete is what a queue's life costs the runtime on
// in-memory stores: one op starts a queue, publishes one message to it
// and deletes it. allocs/op guards the per-queue allocations (the actor,
// its channels and maps, its first mailbox chunk), ns/op the start and
// stop of its goroutine.
func BenchmarkQueueStartDelete(b *testing.B) {
	ctx := context.Background()
	s := newStores()
	body := []byte("x")
	b.ReportAllocs()
	for i := range b.N {
		name := "q" + strconv.Itoa(i)
		q, err := Start(ctx, Config{VHost: "/", Name: name, Shard: name, Stores: s, Broker: "n1", Incarnation: 1, OwnCursor: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Publish(storage.Record{Body: body}, NoTTL, nil, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := q.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		<-q.Done()
	}
}

// BenchmarkIdleQueueHeap reports the live heap (runtime/metrics, after
// two collections) an idle, empty queue costs the runtime, as
// heap-B/queue: the Queue, its channels, what its actor left; as
// stack-B/queue the goroutine stacks it keeps and as goroutines/queue the
// goroutines, both 0 once the actor has exited for want of work (which
// the benchmark waits for, idleAfter to twice that). The stores' share
// is left out (an in-memory shard holding a message takes a 15 KiB chunk
// of slots); the root package's benchmark of the same name counts a whole
// durable queue holding a message. b.N queues are kept alive at once,
// each of which has run its actor once.
func BenchmarkIdleQueueHeap(b *testing.B) {
	ctx := context.Background()
	s := newStores()
	qs := make([]*Queue, 0, b.N)
	b.Cleanup(func() {
		for _, q := range qs {
			q.Stop()
		}
	})
	base, baseStacks, baseG := measure.LiveHeap(), measure.Stacks(), runtime.NumGoroutine()
	for i := range b.N {
		name := "q" + strconv.Itoa(i)
		q, err := Start(ctx, Config{VHost: "/", Name: name, Shard: name, Stores: s, Broker: "n1", Incarnation: 1})
		if err != nil {
			b.Fatal(err)
		}
		qs = append(qs, q)
	}
	for _, q := range qs {
		if _, err := q.Stats(ctx); err != nil { // every actor has run
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, q := range qs {
		for q.running.Load() {
			time.Sleep(time.Millisecond)
		}
	}
	b.ReportMetric(float64(measure.LiveHeap()-base)/float64(b.N), "heap-B/queue")
	b.ReportMetric(float64(measure.Stacks()-baseStacks)/float64(b.N), "stack-B/queue")
	b.ReportMetric(float64(runtime.NumGoroutine()-baseG)/float64(b.N), "goroutines/queue")
}

// BenchmarkActorWake is what it costs to wake an idle queue: a Stats
// call (send, the actor's step, the reply) to a queue whose goroutine is
// parked in its select (parked: woken) or has exited for want of work
// (exited: started again). ns/call times the call alone; the difference
// is the price of a goroutine start, which a queue idle for longer than
// idleAfter between its ops pays per op.
func BenchmarkActorWake(b *testing.B) {
	ctx := context.Background()
	for _, exited := range []bool{false, true} {
		name := "parked"
		if exited {
			name = "exited"
		}
		b.Run(name, func(b *testing.B) {
			saved := idleAfter
			if exited {
				idleAfter = time.Nanosecond
			}
			q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1})
			idleAfter = saved
			if err != nil {
				b.Fatal(err)
			}
			defer q.Stop()
			publish := storage.Record{Body: []byte("x")}
			if err := q.Publish(publish, NoTTL, nil, 0); err != nil { // a queue holding a message
				b.Fatal(err)
			}
			var took time.Duration
			b.ReportAllocs()
			for range b.N {
				for exited && q.running.Load() {
					runtime.Gosched()
				}
				t0 := time.Now()
				if _, err := q.Stats(ctx); err != nil {
					b.Fatal(err)
				}
				took += time.Since(t0)
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N), "ns/call")
		})
	}
}
