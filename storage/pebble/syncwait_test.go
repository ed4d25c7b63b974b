package pebble_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/pebble"
)

// syncGate holds the WAL's syncs while armed, until released.
type syncGate struct {
	armed   atomic.Bool
	entered chan struct{} // a sync is being held
	release chan struct{}
}

func (g *syncGate) String() string { return "syncGate" }

func (g *syncGate) MaybeError(op errorfs.Op) error {
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		if g.armed.CompareAndSwap(true, false) {
			close(g.entered)
			<-g.release
		}
	}
	return nil
}

// TestDeleteDoesNotWaitForSync checks that a shard's deletes (the acks of
// a queue) and its transient appends go on while a persistent Append of
// the same shard waits for its fsync, and that the Append returns only
// once that fsync is done.
func TestDeleteDoesNotWaitForSync(t *testing.T) {
	ctx := context.Background()
	gate := &syncGate{entered: make(chan struct{}), release: make(chan struct{})}
	h := openDB(t, "db", pebble.WithFS(errorfs.Wrap(vfs.NewMem(), gate)))
	s := pebble.New(h.DB)
	_, err := s.Append(ctx, "q", []storage.Record{{Body: []byte("a"), Persistent: true}, {Body: []byte("b"), Persistent: true}})
	require.NoError(t, err)

	gate.armed.Store(true)
	appended := make(chan error, 1)
	recs := []storage.Record{{Body: []byte("c"), Persistent: true}}
	go func() {
		_, err := s.Append(ctx, "q", recs)
		appended <- err
	}()
	<-gate.entered

	deleted := make(chan error, 1)
	go func() {
		err := s.DeleteByOffsets(ctx, "q", []uint64{0})
		if err == nil {
			_, err = s.Append(ctx, "q", []storage.Record{{Body: []byte("d")}})
		}
		deleted <- err
	}()
	select {
	case err := <-deleted:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(gate.release)
		t.Fatal("a delete waited for another write's fsync")
	}
	select {
	case err := <-appended:
		t.Fatalf("Append returned (%v) before its fsync", err)
	default:
	}
	close(gate.release)
	require.NoError(t, <-appended)
	require.Equal(t, uint64(2), recs[0].Offset)

	got, err := s.Read(ctx, "q", 0, 10)
	require.NoError(t, err)
	var bodies []string
	for _, r := range got {
		bodies = append(bodies, string(r.Body))
	}
	require.Equal(t, []string{"b", "c", "d"}, bodies)
	n, err := s.Count(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
}
