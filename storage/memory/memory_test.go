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
	})
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
