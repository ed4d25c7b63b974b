package queue

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// readCounter counts Read calls on a shard store.
type readCounter struct {
	storage.ShardStore
	reads atomic.Int64
}

func (r *readCounter) Read(ctx context.Context, shard string, from uint64, max int) ([]storage.Record, error) {
	r.reads.Add(1)
	return r.ShardStore.Read(ctx, shard, from, max)
}

// dropper is a readCounter whose store can drop transient records itself
// (storage.TransientDropper); it finds them with reads it does not count.
type dropper struct {
	*readCounter
	drops atomic.Int64
}

func (d *dropper) DropTransient(ctx context.Context, shard string) (int, error) {
	d.drops.Add(1)
	recs, err := d.ShardStore.Read(ctx, shard, 0, 1<<20)
	if err != nil {
		return 0, err
	}
	var drop []uint64
	for _, r := range recs {
		if !r.Persistent {
			drop = append(drop, r.Offset)
		}
	}
	return len(drop), d.ShardStore.DeleteByOffsets(ctx, shard, drop)
}

// TestRecoveryDropsTransient checks that a durable queue's start drops its
// transient records and keeps the persistent ones in order, and that it
// leaves the finding to a store that can do it without reading
// (storage.TransientDropper): a queue deep in persistent messages then
// starts without reading its backlog.
func TestRecoveryDropsTransient(t *testing.T) {
	tests := []struct {
		name      string
		wrap      func(*readCounter) storage.ShardStore
		wantReads bool
	}{
		{"StoreReadsRecords", func(r *readCounter) storage.ShardStore { return r }, true},
		{"StoreDropsItself", func(r *readCounter) storage.ShardStore { return &dropper{readCounter: r} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := newStores()
			rc := &readCounter{ShardStore: s.Shards}
			s.Shards = tt.wrap(rc)
			var recs []storage.Record
			var want []string
			for i := range 10 {
				body := fmt.Sprintf("m%d", i)
				recs = append(recs, storage.Record{Body: []byte(body), Persistent: i%2 == 0})
				if i%2 == 0 {
					want = append(want, body)
				}
			}
			_, err := s.Shards.Append(ctx, "/q", recs)
			require.NoError(t, err)

			q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: s, Broker: "n1", Incarnation: 1, DropTransient: true})
			require.NoError(t, err)
			t.Cleanup(q.Stop)
			require.Equal(t, tt.wantReads, rc.reads.Load() > 0, "records read at start: %d", rc.reads.Load())
			if d, ok := s.Shards.(*dropper); ok {
				require.EqualValues(t, 1, d.drops.Load())
			}
			st, err := q.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, Stats{Ready: 5}, st)
			for _, body := range want {
				m, _, ok, err := q.Get(ctx, owner, true)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, body, string(m.Body))
			}
			_, _, ok, err := q.Get(ctx, owner, true)
			require.NoError(t, err)
			require.False(t, ok)
		})
	}
}
