package faultstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/faultstore"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/meta/metatest"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/storage/storagetest"
	"github.com/warrenmq/broker/unacked"
	"github.com/warrenmq/broker/unacked/indextest"
)

// Without rules the wrappers are the stores they wrap: each passes its
// interface's conformance suite.
func TestPassThroughConformance(t *testing.T) {
	t.Run("shards", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) (storage.ShardStore, func() storage.ShardStore) {
			inner := memory.New()
			in := faultstore.New()
			in.SetTracing(false)
			s := faultstore.WrapShards(inner, in)
			return s, func() storage.ShardStore { return s }
		}, storagetest.Without("storage.MemoryReporter", "storage.TransientDropper", "storage.Purger"))
	})
	t.Run("meta", func(t *testing.T) {
		metatest.Run(t, func(t *testing.T) meta.Store {
			in := faultstore.New()
			in.SetTracing(false)
			return faultstore.WrapMeta(metamemory.New(), in)
		}, metatest.Without("meta.ChangeFeed", "meta.Records", "meta.Replicated", "meta.Syncer"))
	})
	t.Run("index", func(t *testing.T) {
		indextest.Run(t, func(t *testing.T) unacked.Index {
			in := faultstore.New()
			in.SetTracing(false)
			return faultstore.WrapIndex(unacked.NewMemoryIndex(), in)
		}, indextest.Without("unacked.Claimer"))
	})
}

type fixture struct {
	in     *faultstore.Injector
	shards *faultstore.Shards
	meta   *faultstore.Meta
	index  *faultstore.Index
}

func newFixture() fixture {
	in := faultstore.New()
	return fixture{
		in:     in,
		shards: faultstore.WrapShards(memory.New(), in),
		meta:   faultstore.WrapMeta(metamemory.New(), in),
		index:  faultstore.WrapIndex(unacked.NewMemoryIndex(), in),
	}
}

var qk = meta.QueueKey{VHost: "/", Name: "q"}

func TestRules(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	entry := func(off uint64, s unacked.State) unacked.Entry {
		return unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q", Offset: off}, State: s}
	}
	tests := []struct {
		name string
		// setup installs rules; run makes calls and returns their errors
		// in order.
		setup func(f fixture)
		run   func(f fixture) []error
		want  []error
	}{
		{
			name:  "fail once then pass",
			setup: func(f fixture) { f.in.Fail(faultstore.On(faultstore.Append), 1, boom) },
			run: func(f fixture) []error {
				_, e1 := f.shards.Append(ctx, "s", []storage.Record{{Body: []byte("a")}})
				_, e2 := f.shards.Append(ctx, "s", []storage.Record{{Body: []byte("b")}})
				return []error{e1, e2}
			},
			want: []error{boom, nil},
		},
		{
			name:  "fail always with the default error",
			setup: func(f fixture) { f.in.Fail(faultstore.On(faultstore.IndexDelete), 0, nil) },
			run: func(f fixture) []error {
				return []error{f.index.Delete(ctx, nil), f.index.Delete(ctx, nil)}
			},
			want: []error{faultstore.ErrInjected, faultstore.ErrInjected},
		},
		{
			name: "nth matching call",
			setup: func(f fixture) {
				f.in.Fail(faultstore.Nth(2, faultstore.On(faultstore.CompareAndSwapOffset)), 1, boom)
			},
			run: func(f fixture) []error {
				_, e1 := f.meta.CompareAndSwapOffset(ctx, qk, 0, 1)
				_, e2 := f.meta.CompareAndSwapOffset(ctx, qk, 1, 2)
				_, e3 := f.meta.CompareAndSwapOffset(ctx, qk, 1, 2)
				return []error{e1, e2, e3}
			},
			want: []error{nil, boom, nil},
		},
		{
			name:  "put of returned entries only",
			setup: func(f fixture) { f.in.Fail(faultstore.PutState(unacked.Returned), 0, boom) },
			run: func(f fixture) []error {
				return []error{
					f.index.Put(ctx, []unacked.Entry{entry(1, unacked.Delivered)}),
					f.index.Put(ctx, []unacked.Entry{entry(1, unacked.Returned)}),
				}
			},
			want: []error{nil, boom},
		},
		{
			name:  "crash stops every store",
			setup: func(f fixture) { f.in.CrashAt(faultstore.On(faultstore.CompareAndSwapOffset)) },
			run: func(f fixture) []error {
				e1 := f.index.Put(ctx, []unacked.Entry{entry(1, unacked.Delivered)})
				_, e2 := f.meta.CompareAndSwapOffset(ctx, qk, 0, 1)
				_, e3 := f.shards.Count(ctx, "s")
				_, e4 := f.meta.Offset(ctx, qk)
				return []error{e1, e2, e3, e4}
			},
			want: []error{nil, faultstore.ErrCrashed, faultstore.ErrCrashed, faultstore.ErrCrashed},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			tc.setup(f)
			got := tc.run(f)
			require.Len(t, got, len(tc.want))
			for i := range got {
				if tc.want[i] == nil {
					require.NoError(t, got[i], "call %d", i)
				} else {
					require.ErrorIs(t, got[i], tc.want[i], "call %d", i)
				}
			}
		})
	}
}

// A failed call must leave the inner store untouched, and a crash must
// leave exactly what happened before it.
func TestFailedCallsDoNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	rule := f.in.Fail(faultstore.On(faultstore.Append), 1, nil)
	_, err := f.shards.Append(ctx, "s", []storage.Record{{Body: []byte("x")}})
	require.ErrorIs(t, err, faultstore.ErrInjected)
	<-rule.Fired()
	n, err := f.shards.Inner().Count(ctx, "s")
	require.NoError(t, err)
	require.Zero(t, n)

	f.in.CrashAt(faultstore.On(faultstore.CompareAndSwapOffset))
	require.NoError(t, f.index.Put(ctx, []unacked.Entry{{Key: unacked.Key{VHost: "/", Queue: "q"}, State: unacked.Delivered}}))
	_, err = f.meta.CompareAndSwapOffset(ctx, qk, 0, 1)
	require.ErrorIs(t, err, faultstore.ErrCrashed)
	<-f.in.Crashed()
	require.True(t, f.in.IsCrashed())
	off, err := f.meta.Inner().Offset(ctx, qk)
	require.NoError(t, err)
	require.Zero(t, off, "the crashed swap did not happen")
	_, err = f.index.Inner().Get(ctx, unacked.Key{VHost: "/", Queue: "q"})
	require.NoError(t, err, "the write before the crash did")

	// Clear "restarts": calls pass again.
	f.in.Clear()
	require.False(t, f.in.IsCrashed())
	ok, err := f.meta.CompareAndSwapOffset(ctx, qk, 0, 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, f.in.Count(faultstore.CompareAndSwapOffset))
}

func TestTraceRecordsOrderAndOutcome(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	f.in.Fail(faultstore.On(faultstore.DeleteByOffsets), 1, nil)
	_, err := f.shards.Append(ctx, "s", []storage.Record{{Body: []byte("x")}})
	require.NoError(t, err)
	require.Error(t, f.shards.DeleteByOffsets(ctx, "s", []uint64{0}))
	require.NoError(t, f.shards.DeleteByOffsets(ctx, "s", []uint64{0}))
	tr := f.in.Trace()
	require.Len(t, tr, 3)
	require.Equal(t, faultstore.Append, tr[0].Op)
	require.False(t, tr[0].Injected)
	require.Equal(t, faultstore.DeleteByOffsets, tr[1].Op)
	require.True(t, tr[1].Injected)
	require.ErrorIs(t, tr[1].Err, faultstore.ErrInjected)
	require.Equal(t, []uint64{0}, tr[2].Offsets)
	require.NoError(t, tr[2].Err)
}

func TestBlockHoldsTheCallUntilRelease(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	rule := f.in.Block(faultstore.On(faultstore.Append))
	done := make(chan error, 1)
	go func() {
		_, err := f.shards.Append(ctx, "s", []storage.Record{{Body: []byte("x")}})
		done <- err
	}()
	<-rule.Fired()
	n, err := f.shards.Inner().Count(ctx, "s")
	require.NoError(t, err)
	require.Zero(t, n, "held before the inner store")
	rule.Release()
	rule.Release() // idempotent
	require.NoError(t, <-done)
	n, err = f.shards.Inner().Count(ctx, "s")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	// Only the first matching call is held.
	_, err = f.shards.Append(ctx, "s", []storage.Record{{Body: []byte("y")}})
	require.NoError(t, err)
}

// Crash fails every later call at once, and a call a Block rule holds is
// released to fail: a dead process's stalled write never lands.
func TestCrashNowFailsHeldAndLaterCalls(t *testing.T) {
	ctx := context.Background()
	f := newFixture()
	rule := f.in.Block(faultstore.On(faultstore.Append))
	done := make(chan error, 1)
	go func() {
		_, err := f.shards.Append(ctx, "s", []storage.Record{{Body: []byte("held")}})
		done <- err
	}()
	<-rule.Fired()
	f.in.Crash()
	require.ErrorIs(t, <-done, faultstore.ErrCrashed)
	<-f.in.Crashed()
	_, err := f.meta.Offset(ctx, qk)
	require.ErrorIs(t, err, faultstore.ErrCrashed)
	n, err := f.shards.Inner().Count(ctx, "s")
	require.NoError(t, err)
	require.Zero(t, n, "the held append did not land")
	f.in.Crash() // twice is harmless
	f.in.Clear()
	_, err = f.shards.Append(ctx, "s", []storage.Record{{Body: []byte("after")}})
	require.NoError(t, err)
}
