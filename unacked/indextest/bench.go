package indextest

import (
	"context"
	"fmt"
	"testing"

	"github.com/warrenmq/broker/unacked"
)

// Bench measures the queue runtime's hot index writes, each a batch of 64
// as one claim or one multiple-ack produces: "claim+ack" puts 64 fresh
// Delivered entries and deletes them, "requeue" flips 64 existing entries
// to Returned in place. open is called once per sub-benchmark.
func Bench(b *testing.B, open func(b *testing.B) unacked.Index) {
	ctx := context.Background()
	const size = 64
	fill := func(entries []unacked.Entry, keys []unacked.Key, first uint64, state unacked.State) {
		for i := range entries {
			off := first + uint64(i)
			entries[i] = unacked.Entry{
				Key:        unacked.Key{VHost: "/", Queue: "bench", Offset: off},
				Connection: "127.0.0.1:40000 -> 127.0.0.1:5672", Channel: 1, DeliveryTag: off + 1,
				Broker: "node-1", Incarnation: 1, DeliveredAt: int64(off), DeliveryCount: 1,
				State: state,
			}
			keys[i] = entries[i].Key
		}
	}
	b.Run(fmt.Sprintf("claim+ack/batch=%d", size), func(b *testing.B) {
		x := open(b)
		entries := make([]unacked.Entry, size)
		keys := make([]unacked.Key, size)
		var next uint64
		b.ReportAllocs()
		for b.Loop() {
			fill(entries, keys, next, unacked.Delivered)
			next += size
			if err := x.Put(ctx, entries); err != nil {
				b.Fatal(err)
			}
			if err := x.Delete(ctx, keys); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/entry")
	})
	b.Run(fmt.Sprintf("requeue/batch=%d", size), func(b *testing.B) {
		x := open(b)
		delivered := make([]unacked.Entry, size)
		returned := make([]unacked.Entry, size)
		keys := make([]unacked.Key, size)
		fill(delivered, keys, 0, unacked.Delivered)
		fill(returned, keys, 0, unacked.Returned)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			batch := delivered
			if i%2 == 0 {
				batch = returned
			}
			if err := x.Put(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/entry")
	})
}
