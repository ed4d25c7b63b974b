package metatest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/warrenmq/broker/meta"
)

// Bench measures CompareAndSwapOffset: one goroutine on one queue
// (uncontended, the queue actor's normal case), goroutines racing on one
// queue with read + retry (contended, consumers on several nodes), and
// goroutines each on its own queue (many queue actors at once). open is
// called once per sub-benchmark.
func Bench(b *testing.B, open func(b *testing.B) meta.Store) {
	ctx := context.Background()
	b.Run("uncontended", func(b *testing.B) {
		s := open(b)
		q := meta.QueueKey{VHost: "/", Name: "q"}
		b.ReportAllocs()
		var cur uint64
		for b.Loop() {
			ok, err := s.CompareAndSwapOffset(ctx, q, cur, cur+64)
			if err != nil || !ok {
				b.Fatalf("swap from %d: %v, %v", cur, ok, err)
			}
			cur += 64
		}
	})
	b.Run("contended", func(b *testing.B) {
		s := open(b)
		q := meta.QueueKey{VHost: "/", Name: "hot"}
		var retries atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for {
					cur, err := s.Offset(ctx, q)
					if err != nil {
						b.Error(err)
						return
					}
					ok, err := s.CompareAndSwapOffset(ctx, q, cur, cur+1)
					if err != nil {
						b.Error(err)
						return
					}
					if ok {
						break
					}
					retries.Add(1)
				}
			}
		})
		b.ReportMetric(float64(retries.Load())/float64(b.N), "retries/op")
	})
	b.Run("parallel-queues", func(b *testing.B) {
		s := open(b)
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			q := meta.QueueKey{VHost: "/", Name: string(rune('a' + next.Add(1)))}
			var cur uint64
			for pb.Next() {
				ok, err := s.CompareAndSwapOffset(ctx, q, cur, cur+1)
				if err != nil || !ok {
					b.Errorf("swap from %d: %v, %v", cur, ok, err)
					return
				}
				cur++
			}
		})
	})
}
