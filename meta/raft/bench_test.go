package raft_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/metatest"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/storagetest"
)

// BenchmarkAppend measures Append on a 3-node in-memory cluster with fsync
// on, through a follower, from 1 and 64 concurrent publishers, each
// appending batches of 1 or 16 persistent records. Each op is one Append
// call. It reports records/s and raft entries/s (proposals after the
// proposer's batching) next to ns/op.
func BenchmarkAppend(b *testing.B) {
	for _, publishers := range []int{1, 64} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("publishers=%d/batch=%d", publishers, batch), func(b *testing.B) {
				c := newCluster(b, 3, 0)
				ctx := context.Background()
				n := c.nodes[c.follower(ctx)]
				recs := make([]storage.Record, batch)
				for i := range recs {
					recs[i] = storage.Record{Properties: []byte{0x90, 0, 0x10}, Body: make([]byte, 128), Persistent: true}
				}
				b.ReportAllocs()
				b.SetBytes(int64(batch * 131))
				startIdx := n.AppliedIndex()
				start := time.Now()
				var wg sync.WaitGroup
				per := (b.N + publishers - 1) / publishers
				b.ResetTimer()
				for p := range publishers {
					wg.Go(func() {
						mine := make([]storage.Record, batch)
						for range per {
							copy(mine, recs)
							if _, err := n.Shards().Append(ctx, fmt.Sprint("q", p%8), mine); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				secs := time.Since(start).Seconds()
				b.ReportMetric(float64(per*publishers*batch)/secs, "records/s")
				b.ReportMetric(float64(n.AppliedIndex()-startIdx)/secs, "entries/s")
			})
		}
	}
}

// BenchmarkShardStore runs the standard ShardStore benchmarks through a
// follower of a 3-node cluster.
func BenchmarkShardStore(b *testing.B) {
	storagetest.Benchmark(b, func(b *testing.B) storage.ShardStore {
		c := newCluster(b, 3, 0)
		return c.nodes[c.follower(context.Background())].Shards()
	})
}

// BenchmarkCursor runs the standard cursor benchmarks through a follower.
func BenchmarkCursor(b *testing.B) {
	metatest.Bench(b, func(b *testing.B) meta.Store {
		c := newCluster(b, 3, 0)
		return c.nodes[c.follower(context.Background())]
	})
}
