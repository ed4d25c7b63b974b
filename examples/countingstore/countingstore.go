package countingstore

import (
	"context"
	"sync/atomic"

	"github.com/warrenmq/broker/storage"
)

// Counts are the operations a wrapped store has seen. Fields are read with
// Load; they only grow.
type Counts struct {
	Appends         atomic.Uint64 // Append calls
	AppendedRecords atomic.Uint64 // records appended successfully
	Reads           atomic.Uint64 // Read calls
	ReadRecords     atomic.Uint64 // records returned by Read
	Deletes         atomic.Uint64 // DeleteByOffsets calls
	DeletedOffsets  atomic.Uint64 // offsets passed to successful DeleteByOffsets
	FirstOffsets    atomic.Uint64
	CountCalls      atomic.Uint64
	DeleteShards    atomic.Uint64
	Syncs           atomic.Uint64
	Errors          atomic.Uint64 // calls that returned an error
}

// Wrap returns a store that forwards every call to inner and counts it in
// the returned Counts. The wrapper has every optional interface of inner
// (storage.Capabilities) and no other, so wrapping never changes what the
// broker may rely on: it counts Sync itself, and storage.Wrap forwards
// the optional interfaces it does not count (MemoryReporter,
// TransientDropper, Purger) straight to inner.
func Wrap(inner storage.ShardStore) (storage.ShardStore, *Counts) {
	s := &Store{inner: inner, counts: &Counts{}}
	if sy, ok := inner.(storage.Syncer); ok {
		return storage.Wrap(&syncStore{Store: s, syncer: sy}, inner), s.counts
	}
	return storage.Wrap(s, inner), s.counts
}

// Store is the counting wrapper of a store that cannot sync.
type Store struct {
	inner  storage.ShardStore
	counts *Counts
}

var (
	_ storage.ShardStore = (*Store)(nil)
	_ storage.ShardStore = (*syncStore)(nil)
	_ storage.Syncer     = (*syncStore)(nil)
)

func (s *Store) failed(err error) error {
	if err != nil {
		s.counts.Errors.Add(1)
	}
	return err
}

// Append implements storage.ShardStore.
func (s *Store) Append(ctx context.Context, shard string, recs []storage.Record) (uint64, error) {
	s.counts.Appends.Add(1)
	first, err := s.inner.Append(ctx, shard, recs)
	if err == nil {
		s.counts.AppendedRecords.Add(uint64(len(recs)))
	}
	return first, s.failed(err)
}

// Read implements storage.ShardStore.
func (s *Store) Read(ctx context.Context, shard string, from uint64, max int) ([]storage.Record, error) {
	s.counts.Reads.Add(1)
	recs, err := s.inner.Read(ctx, shard, from, max)
	s.counts.ReadRecords.Add(uint64(len(recs)))
	return recs, s.failed(err)
}

// DeleteByOffsets implements storage.ShardStore.
func (s *Store) DeleteByOffsets(ctx context.Context, shard string, offsets []uint64) error {
	s.counts.Deletes.Add(1)
	err := s.inner.DeleteByOffsets(ctx, shard, offsets)
	if err == nil {
		s.counts.DeletedOffsets.Add(uint64(len(offsets)))
	}
	return s.failed(err)
}

// FirstOffset implements storage.ShardStore.
func (s *Store) FirstOffset(ctx context.Context, shard string) (uint64, error) {
	s.counts.FirstOffsets.Add(1)
	off, err := s.inner.FirstOffset(ctx, shard)
	return off, s.failed(err)
}

// Count implements storage.ShardStore.
func (s *Store) Count(ctx context.Context, shard string) (uint64, error) {
	s.counts.CountCalls.Add(1)
	n, err := s.inner.Count(ctx, shard)
	return n, s.failed(err)
}

// DeleteShard implements storage.ShardStore.
func (s *Store) DeleteShard(ctx context.Context, shard string) error {
	s.counts.DeleteShards.Add(1)
	return s.failed(s.inner.DeleteShard(ctx, shard))
}

// syncStore adds Sync for an inner store that has it.
type syncStore struct {
	*Store
	syncer storage.Syncer
}

// Sync implements storage.Syncer.
func (s *syncStore) Sync(ctx context.Context) error {
	s.counts.Syncs.Add(1)
	return s.failed(s.syncer.Sync(ctx))
}
