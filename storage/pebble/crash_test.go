package pebble_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/pebble"
)

// TestCrash simulates power loss: the DB is reopened on a copy of the
// file system that keeps all synced data and, depending on the seed, some
// unsynced data. Whatever survives, a persistent record that Append
// acknowledged is there, the shard state agrees with the records, and no
// surviving offset is assigned again.
func TestCrash(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 99))
			fs := vfs.NewCrashableMem()
			h := openDB(t, "db", pebble.WithFS(fs))
			s := pebble.New(h.DB)

			acked := map[uint64]bool{} // persistent and not deleted
			for i := range 60 {
				persistent := rng.IntN(3) == 0
				recs := []storage.Record{{Body: fmt.Appendf(nil, "%d", i), Persistent: persistent}, {Body: []byte("x")}}
				first, err := s.Append(ctx, "q", recs)
				require.NoError(t, err)
				if persistent {
					// The batch was synced, and with it every write
					// before it, the transient record beside it too.
					acked[first], acked[first+1] = true, true
				}
				if rng.IntN(4) == 0 && first > 0 {
					victim := uint64(rng.IntN(int(first)))
					require.NoError(t, s.DeleteByOffsets(ctx, "q", []uint64{victim}))
					// An unsynced delete may be lost: the record may
					// come back, which redelivers, never loses.
					delete(acked, victim)
				}
			}

			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: int(seed * 12), RNG: rand.New(rand.NewPCG(seed, 7))})
			h2 := openDB(t, "db", pebble.WithFS(crashed))
			s2 := pebble.New(h2.DB)

			got, err := s2.Read(ctx, "q", 0, math.MaxInt)
			require.NoError(t, err)
			present := map[uint64]bool{}
			for _, r := range got {
				present[r.Offset] = true
			}
			for o := range acked {
				require.True(t, present[o], "acknowledged persistent record %d lost", o)
			}
			n, err := s2.Count(ctx, "q")
			require.NoError(t, err)
			require.Equal(t, uint64(len(got)), n, "Count after crash")
			first, err := s2.Append(ctx, "q", []storage.Record{{Persistent: true}})
			require.NoError(t, err)
			if len(got) > 0 {
				require.Greater(t, first, got[len(got)-1].Offset, "offset reused after crash")
			}
		})
	}
}
