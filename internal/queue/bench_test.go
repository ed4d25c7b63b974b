package queue

import (
	"context"
	"fmt"
	"testing"

	"github.com/warrenmq/broker/internal/measure"
	"github.com/warrenmq/broker/internal/sharedtest"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
)

// ackSink hands deliveries to an acking goroutine, as a channel that
// keeps up does (Deliver runs on the actor and must not wait on it).
type ackSink struct{ refs chan Ref }

func (s *ackSink) Deliver(c *Consumer, m Message) bool {
	s.refs <- m.Ref
	return true
}

func (s *ackSink) Cancelled(*Consumer) {}

// BenchmarkPublishConsumeAck is the single-node hot path: publish, deliver
// to a consumer with prefetch, ack, on in-memory stores.
func BenchmarkPublishConsumeAck(b *testing.B) {
	ctx := context.Background()
	q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Stop()
	benchPublishConsumeAck(b, q, q)
}

// benchPublishConsumeAck publishes b.N 128-byte messages on pub while a
// consumer with a prefetch of 256 on con acks each delivery.
func benchPublishConsumeAck(b *testing.B, pub, con *Queue) {
	s := &ackSink{refs: make(chan Ref, 256)}
	credit := &Credit{}
	credit.SetLimit(256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range b.N {
			_ = con.Settle(Ack, <-s.refs)
			credit.Release(1)
			con.Kick()
		}
	}()
	if err := con.Consume(context.Background(), &Consumer{Tag: "c", Owner: owner, Credit: credit, Receiver: s}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 128)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := pub.Publish(storage.Record{Body: body}, NoTTL, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}

// BenchmarkGet is basic.get with ack on a queue filled beforehand.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Stop()
	body := make([]byte, 128)
	for range b.N {
		if err := q.Publish(storage.Record{Body: body}, NoTTL, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m, _, ok, err := q.Get(ctx, owner, false)
		if err != nil || !ok {
			b.Fatal(err, ok)
		}
		_ = q.AckGot(m.Ref) // as the session acks a get
	}
}

// BenchmarkSharedPublishConsumeAck is the shared-mode path across two
// brokers on one sharedtest store: publish on A, deliver and ack on B,
// every claim a Claimer claim, every change through Observe.
func BenchmarkSharedPublishConsumeAck(b *testing.B) {
	ctx := context.Background()
	s := sharedtest.New()
	stores := Stores{Shards: s.Shards, Cursors: s.Meta, Index: s.Index}
	start := func(broker string) *Queue {
		q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: stores, Broker: broker, Incarnation: 1, Shared: true})
		if err != nil {
			b.Fatal(err)
		}
		return q
	}
	qa, qb := start("a"), start("b")
	defer qa.Stop()
	defer qb.Stop()
	defer s.Watch(func(c meta.Change) { qa.Observe(c); qb.Observe(c) })()
	benchPublishConsumeAck(b, qa, qb)
}

// BenchmarkConsumerRegisterCancel measures one basic.consume and one
// basic.cancel on a queue that already has n consumers: the cost must not
// grow with n (it used to be linear, so registering or cancelling n
// consumers was quadratic). cpu-ns/op is the process's CPU time per op,
// which a busy machine disturbs less than wall time.
func BenchmarkConsumerRegisterCancel(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprintf("consumers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Stop()
			s := &ackSink{}
			for i := range n {
				owner := Owner{Connection: "c", Channel: uint16(i % 100)}
				if err := q.Consume(ctx, &Consumer{Tag: fmt.Sprint("t", i), Owner: owner, Receiver: s}); err != nil {
					b.Fatal(err)
				}
			}
			cs := make([]*Consumer, b.N)
			for i := range cs {
				cs[i] = &Consumer{Tag: fmt.Sprint("b", i), Owner: Owner{Connection: "b"}, Receiver: s}
			}
			b.ResetTimer()
			cpu := measure.ProcessCPU()
			for i := range b.N {
				if err := q.Consume(ctx, cs[i]); err != nil {
					b.Fatal(err)
				}
				if _, err := q.Cancel(ctx, cs[i].Owner, cs[i].Tag); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(measure.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
