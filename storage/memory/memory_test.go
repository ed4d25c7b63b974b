package memory_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) (storage.ShardStore, func() storage.ShardStore) {
		return memory.New(), nil // nothing to reopen: memory does not persist
	}, storagetest.Without("storage.Syncer", "storage.TransientDropper", "storage.Purger"))
}

func BenchmarkStore(b *testing.B) {
	storagetest.Benchmark(b, func(*testing.B) storage.ShardStore { return memory.New() })
}

// TestSharesBytes pins down the ownership rule in the package comment: the
// store keeps the caller's Properties and Body and Read hands them out again,
// without copying.
func TestSharesBytes(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	props, body := []byte{0x80, 0x00}, []byte("body")
	_, err := s.Append(ctx, "q", []storage.Record{{Properties: props, Body: body}})
	require.NoError(t, err)
	got, err := s.Read(ctx, "q", 0, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Same(t, &props[0], &got[0].Properties[0])
	require.Same(t, &body[0], &got[0].Body[0])
}

func TestNilAndEmptyPreserved(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	_, err := s.Append(ctx, "q", []storage.Record{{}, {Properties: []byte{}, Body: []byte{}}})
	require.NoError(t, err)
	got, err := s.Read(ctx, "q", 0, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Nil(t, got[0].Properties)
	require.Nil(t, got[0].Body)
	require.NotNil(t, got[1].Properties)
	require.NotNil(t, got[1].Body)
}

// TestBytes: Bytes follows the Properties+Body bytes of the live records
// through appends, deletes (also of unknown or already deleted offsets) and
// shard deletion, across shards.
func TestBytes(t *testing.T) {
	ctx := context.Background()
	rec := func(props, body int) storage.Record {
		return storage.Record{Properties: make([]byte, props), Body: make([]byte, body)}
	}
	s := memory.New()
	steps := []struct {
		name string
		do   func() error
		want int64
	}{
		{"empty", func() error { return nil }, 0},
		{"append q", func() error {
			_, err := s.Append(ctx, "q", []storage.Record{rec(2, 10), rec(0, 100), rec(3, 0)})
			return err
		}, 115},
		{"append r", func() error { _, err := s.Append(ctx, "r", []storage.Record{rec(1, 1000)}); return err }, 1116},
		{"delete one", func() error { return s.DeleteByOffsets(ctx, "q", []uint64{1}) }, 1016},
		{"delete again and unknown", func() error { return s.DeleteByOffsets(ctx, "q", []uint64{1, 99}) }, 1016},
		{"delete shard q", func() error { return s.DeleteShard(ctx, "q") }, 1001},
		{"delete missing shard", func() error { return s.DeleteShard(ctx, "nope") }, 1001},
		{"empty r", func() error { return s.DeleteByOffsets(ctx, "r", []uint64{0}) }, 0},
	}
	for _, st := range steps {
		require.NoError(t, st.do(), st.name)
		require.Equal(t, st.want, s.MemoryBytes(), st.name)
	}
}
