package pebble

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// rangeDels flushes db's memtable and counts the range deletions in its
// tables (the sstable properties say; a flush keeps them).
func rangeDels(t *testing.T, db *pebble.DB) uint64 {
	t.Helper()
	require.NoError(t, db.Flush())
	levels, err := db.SSTables(pebble.WithProperties())
	require.NoError(t, err)
	var n uint64
	for _, level := range levels {
		for _, table := range level {
			n += table.Properties.NumRangeDeletions
		}
	}
	return n
}

// TestDeleteShortQueueWritesNoRangeDeletion checks that deleting a short
// shard or a queue's few index entries writes point tombstones, and a long
// one a single range deletion. Pebble re-fragments every range deletion in
// the memtable on the first read after a new one, so one per deleted queue
// made deleting queues slow down with every queue deleted before.
func TestDeleteShortQueueWritesNoRangeDeletion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		records   int
		rangeDels uint64
	}{
		{"empty", 0, 0},
		{"one record", 1, 0},
		{"at the limit", pointDeleteMax, 0},
		{"past the limit", pointDeleteMax + 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openMem(t)
			x := NewIndex(s.db)
			_, err := s.Append(ctx, "q", make([]storage.Record, tc.records))
			require.NoError(t, err)
			// An acked record leaves a hole the point deletes must skip.
			if tc.records > 2 {
				require.NoError(t, s.DeleteByOffsets(ctx, "q", []uint64{1}))
			}
			var entries []unacked.Entry
			for i := range tc.records {
				entries = append(entries, unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q", Offset: uint64(i)}, State: unacked.Returned})
			}
			require.NoError(t, x.Put(ctx, entries))
			// A neighbour whose keys must survive.
			_, err = s.Append(ctx, "q2", make([]storage.Record, 2))
			require.NoError(t, err)
			require.NoError(t, x.Put(ctx, []unacked.Entry{{Key: unacked.Key{VHost: "/", Queue: "q2"}, State: unacked.Returned}}))

			require.NoError(t, s.DeleteShard(ctx, "q"))
			require.NoError(t, x.DeleteQueue(ctx, "/", "q"))
			require.Equal(t, tc.rangeDels, rangeDels(t, s.db))

			n, err := s.Count(ctx, "q")
			require.NoError(t, err)
			require.Zero(t, n)
			first, err := s.Append(ctx, "q", make([]storage.Record, 1))
			require.NoError(t, err)
			require.Zero(t, first, "a new incarnation starts at offset 0")
			left := 0
			require.NoError(t, x.Queue(ctx, "/", "q", func(unacked.Entry) bool { left++; return true }))
			require.Zero(t, left)

			recs, err := s.Read(ctx, "q2", 0, 10)
			require.NoError(t, err)
			require.Len(t, recs, 2)
			_, err = x.Get(ctx, unacked.Key{VHost: "/", Queue: "q2"})
			require.NoError(t, err)

			// Reopened from disk state: the deleted records are gone.
			fresh := New(s.db)
			recs, err = fresh.Read(ctx, "q", 0, tc.records+10)
			require.NoError(t, err)
			require.Len(t, recs, 1, fmt.Sprint(recs))
		})
	}
}

// BenchmarkShardLifecycle is a short queue's life in the store: one op
// appends a record to a new shard, reads it and deletes the shard. ns/op
// must not grow with b.N (compare -benchtime 1000x with 20000x): each
// deletion used to leave a range deletion that every later read in the
// memtable re-fragmented with all the others.
func BenchmarkShardLifecycle(b *testing.B) {
	ctx := context.Background()
	db, err := Open(b.TempDir(), WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, db.Close()) })
	s := New(db)
	rec := []storage.Record{{Body: []byte("x")}}
	b.ReportAllocs()
	for i := range b.N {
		name := "q" + strconv.Itoa(i)
		if _, err := s.Append(ctx, name, rec); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Read(ctx, name, 0, 1); err != nil {
			b.Fatal(err)
		}
		if err := s.DeleteShard(ctx, name); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkShardPurge purges a shard the two ways the queue runtime can:
// "read" reads the records from the first offset to learn their offsets
// and deletes those, "purger" calls PurgeFrom, which reads nothing. In
// others=N one op purges one of N shards holding a record each and
// appends the record back, round robin: ns/op must not grow with N
// (compare 1000 with 50000). In depth=N one op fills a shard with N
// records of 1 KiB (off the clock) and purges it.
func BenchmarkShardPurge(b *testing.B) {
	ways := []struct {
		name  string
		purge func(s *Store, name string) (uint64, error)
	}{
		{"read", func(s *Store, name string) (uint64, error) {
			ctx := context.Background()
			from, err := s.FirstOffset(ctx, name)
			var n uint64
			for err == nil {
				var recs []storage.Record
				if recs, err = s.Read(ctx, name, from, 1024); err != nil || len(recs) == 0 {
					break
				}
				offs := make([]uint64, len(recs))
				for i, r := range recs {
					offs[i] = r.Offset
				}
				err = s.DeleteByOffsets(ctx, name, offs)
				n += uint64(len(recs))
				from = offs[len(offs)-1] + 1
			}
			return n, err
		}},
		{"purger", func(s *Store, name string) (uint64, error) {
			n, _, err := s.PurgeFrom(context.Background(), name, 0)
			return n, err
		}},
	}
	open := func(b *testing.B) *Store {
		db, err := Open(b.TempDir(), WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(b, err)
		b.Cleanup(func() { require.NoError(b, db.Close()) })
		return New(db)
	}
	ctx := context.Background()
	for _, way := range ways {
		for _, others := range []int{1000, 50000} {
			b.Run(fmt.Sprintf("%s/others=%d", way.name, others), func(b *testing.B) {
				s := open(b)
				rec := []storage.Record{{Body: []byte("x")}}
				names := make([]string, others)
				for i := range names {
					names[i] = "q" + strconv.Itoa(i)
					_, err := s.Append(ctx, names[i], rec)
					require.NoError(b, err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					name := names[i%others]
					if n, err := way.purge(s, name); err != nil || n != 1 {
						b.Fatal(n, err)
					}
					if _, err := s.Append(ctx, name, rec); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(way.name+"/depth=100000", func(b *testing.B) {
			s := open(b)
			recs := make([]storage.Record, 1000)
			for i := range recs {
				recs[i].Body = make([]byte, 1024)
			}
			b.ReportAllocs()
			for i := range b.N {
				b.StopTimer()
				name := "deep" + strconv.Itoa(i)
				for range 100 {
					_, err := s.Append(ctx, name, recs)
					require.NoError(b, err)
				}
				b.StartTimer()
				if n, err := way.purge(s, name); err != nil || n != 100000 {
					b.Fatal(n, err)
				}
			}
		})
	}
}
