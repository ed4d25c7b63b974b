package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// syncShards is a shard store that syncs (it implements storage.Syncer),
// so batches holding a persistent record go through the committer. Every
// Append announces itself on entered and waits for a token on gate.
type syncShards struct {
	storage.ShardStore
	entered chan struct{}
	gate    chan struct{}
	fail    atomic.Bool // the next Append fails
	open    sync.Once
}

// drain forgets the Appends announced and the tokens not taken; only
// while no Append is waiting.
func (s *syncShards) drain() {
	for {
		select {
		case <-s.entered:
		case <-s.gate:
		default:
			return
		}
	}
}

// openGate lets every later Append through.
func (s *syncShards) openGate() { s.open.Do(func() { close(s.gate) }) }

func newSyncShards(s storage.ShardStore) *syncShards {
	return &syncShards{ShardStore: s, entered: make(chan struct{}, 100), gate: make(chan struct{}, 100)}
}

func (s *syncShards) Sync(context.Context) error { return nil }

func (s *syncShards) Append(ctx context.Context, shard string, recs []storage.Record) (uint64, error) {
	select {
	case s.entered <- struct{}{}:
	default: // nobody counts them (openGate)
	}
	<-s.gate
	if s.fail.Swap(false) {
		return 0, errors.New("queue test: append failed")
	}
	return s.ShardStore.Append(ctx, shard, recs)
}

func startSyncing(t *testing.T) (*Queue, *syncShards) {
	t.Helper()
	stores := newStores()
	shards := newSyncShards(stores.Shards)
	stores.Shards = shards
	q := start(t, stores)
	t.Cleanup(shards.openGate) // runs before q.Stop
	return q, shards
}

func (c *confirmLog) got() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.seqs...)
}

// While a persistent batch is being synced the actor goes on settling and
// delivering what is stored (an ack frees prefetch credit and the next
// stored message goes out); the batch is neither delivered nor confirmed
// until its Append returns, and confirms come in publish order.
func TestCommitterKeepsDeliveringDuringSync(t *testing.T) {
	ctx := context.Background()
	q, shards := startSyncing(t)
	s := newSink()
	credit := &Credit{}
	credit.SetLimit(1)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Credit: credit, Receiver: s}))
	var log confirmLog

	// a1 and a2 are stored in one or two batches: let two Appends through,
	// wait until both are stored, and take back a token not used.
	shards.gate <- struct{}{}
	shards.gate <- struct{}{}
	require.NoError(t, q.Publish(recordOf("a1"), NoTTL, &log, 1))
	require.NoError(t, q.Publish(recordOf("a2"), NoTTL, &log, 2))
	_, err := q.Stats(ctx)
	require.NoError(t, err)
	shards.drain()
	a1 := s.next(t)
	require.Equal(t, "a1", string(a1.Body))
	require.Equal(t, []uint64{1, 2}, log.got(), "confirmed before delivered")

	require.NoError(t, q.Publish(recordOf("b"), NoTTL, &log, 3))
	<-shards.entered // b's sync is under way and held
	// What the channel does on basic.ack: settle, free the credit, kick.
	require.NoError(t, q.Settle(Ack, a1.Ref))
	credit.Release(1)
	q.Kick()
	a2 := s.next(t) // the actor is not stuck behind the sync
	require.Equal(t, "a2", string(a2.Body))
	require.NoError(t, q.Settle(Ack, a2.Ref))
	credit.Release(1)
	q.Kick()
	s.none(t)
	require.Equal(t, []uint64{1, 2}, log.got(), "b is not confirmed before its sync")

	shards.gate <- struct{}{}
	b := s.next(t)
	require.Equal(t, "b", string(b.Body))
	require.Equal(t, []uint64{1, 2, 3}, log.got())
	require.NoError(t, q.Settle(Ack, b.Ref))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Consumers: 1}, st)
}

// A failed committed Append confirms its batch with the error, and the
// queue goes on storing and confirming later batches.
func TestCommitterFailedAppendConfirmsWithError(t *testing.T) {
	ctx := context.Background()
	q, shards := startSyncing(t)
	var c errConfirms
	shards.fail.Store(true)
	require.NoError(t, q.Publish(recordOf("lost"), NoTTL, &c, 1))
	<-shards.entered
	shards.gate <- struct{}{}
	require.NoError(t, q.Publish(recordOf("kept"), NoTTL, &c, 2))
	<-shards.entered
	shards.gate <- struct{}{}
	st, err := q.Stats(ctx) // waits for the commit in flight
	require.NoError(t, err)
	require.Equal(t, Stats{Ready: 1}, st)
	require.Equal(t, map[uint64]bool{1: false, 2: true}, c.results())
}

// Many publishes while a sync is held are stored in order, in batches,
// each confirmed once; nothing is lost or reordered.
func TestCommitterBatchesInOrder(t *testing.T) {
	ctx := context.Background()
	q, shards := startSyncing(t)
	shards.openGate()
	var log confirmLog
	const n = 3000
	want := bodies(n)
	for i, b := range want {
		require.NoError(t, q.Publish(recordOf(b), NoTTL, &log, uint64(i+1)))
	}
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Ready: n}, st)
	got := log.got()
	require.Len(t, got, n)
	for i, s := range got {
		require.EqualValues(t, i+1, s)
	}
	all, _ := drainGets(t, q)
	require.Equal(t, want, all)
}
