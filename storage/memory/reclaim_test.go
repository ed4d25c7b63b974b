package memory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// TestReclaim checks the bookkeeping the package comment promises: deleted
// slots are zeroed at once, chunks wholly before the first live record are
// released, and an emptied shard holds no chunk but keeps its next offset.
func TestReclaim(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		appended   int
		deleted    []uint64
		wantBase   uint64
		wantChunks int
		wantHead   int
	}{
		{"HeadInFirstChunk", 300, seqTo(10), 0, 3, 10},
		{"FirstChunkReleased", 300, seqTo(chunkSize + 5), chunkSize, 2, 5},
		{"TwoChunksReleased", 300, seqTo(2 * chunkSize), 2 * chunkSize, 1, 0},
		{"EmptiedHoldsNoChunk", 300, seqTo(300), 300, 0, 0},
		{"EmptiedPartialChunk", 5, seqTo(5), 5, 0, 0},
		{"GapDoesNotMoveHead", 300, []uint64{1, 2, 3}, 0, 3, 0},
		{"HeadSkipsOverGap", 300, []uint64{1, 2, 3, 0}, 0, 3, 4},
		{"GapSpanningChunks", 300, append(seqTo(chunkSize + 1)[1:], 0), chunkSize, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			_, err := s.Append(ctx, "q", make([]storage.Record, tt.appended))
			require.NoError(t, err)
			require.NoError(t, s.DeleteByOffsets(ctx, "q", tt.deleted))
			sh := s.lookup("q")
			sh.mu.Lock()
			defer sh.mu.Unlock()
			require.Equal(t, tt.wantBase, sh.mu.base, "base")
			require.Len(t, sh.mu.chunks, tt.wantChunks, "chunks")
			require.Equal(t, tt.wantHead, sh.mu.head, "head")
			require.Equal(t, uint64(tt.appended), sh.mu.base+uint64(sh.mu.used), "next offset")
			require.Equal(t, uint64(tt.appended-len(tt.deleted)), sh.mu.live)
			for i := range sh.mu.used {
				if sl := sh.slotLocked(i); !sl.live {
					require.Equal(t, slot{}, *sl, "dead slot %d not zeroed", i)
				}
			}
		})
	}
}

func TestDeletedSlotDropsBytes(t *testing.T) {
	ctx := context.Background()
	s := New()
	_, err := s.Append(ctx, "q", []storage.Record{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}})
	require.NoError(t, err)
	require.NoError(t, s.DeleteByOffsets(ctx, "q", []uint64{1}))
	sh := s.lookup("q")
	sh.mu.Lock()
	defer sh.mu.Unlock()
	require.Nil(t, sh.slotLocked(1).rec.Body, "a deleted record's body must not stay reachable")
}

// TestPooledChunksAreZero appends after chunks went through the pool and
// checks no old record shows through.
func TestPooledChunksAreZero(t *testing.T) {
	ctx := context.Background()
	s := New()
	for round := range 3 {
		recs := make([]storage.Record, 3*chunkSize)
		for i := range recs {
			recs[i].Body = []byte{byte(round)}
		}
		first, err := s.Append(ctx, "q", recs)
		require.NoError(t, err)
		// Delete all but the last record, then read it.
		offs := make([]uint64, len(recs)-1)
		for i := range offs {
			offs[i] = first + uint64(i)
		}
		require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
		got, err := s.Read(ctx, "q", 0, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, []byte{byte(round)}, got[0].Body)
		require.NoError(t, s.DeleteByOffsets(ctx, "q", []uint64{got[0].Offset}))
	}
}

func seqTo(n uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}
