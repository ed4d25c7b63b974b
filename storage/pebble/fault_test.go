package pebble_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/pebble"
)

// walFault fails WAL writes and syncs while armed.
type walFault struct{ armed atomic.Bool }

func (f *walFault) String() string { return "walFault" }

func (f *walFault) MaybeError(op errorfs.Op) error {
	if !f.armed.Load() || !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		return errorfs.ErrInjected
	}
	return nil
}

// TestWALFailure checks that a disk that fails the WAL fails the writes,
// with errors that name the cause, instead of exiting or panicking (Pebble
// reports the failure through Logger.Fatalf), and that reads go on working.
func TestWALFailure(t *testing.T) {
	ctx := context.Background()
	fault := &walFault{}
	h := openDB(t, "db", pebble.WithFS(errorfs.Wrap(vfs.NewMem(), fault)))
	s := pebble.New(h.DB)
	_, err := s.Append(ctx, "q", []storage.Record{{Body: []byte("a"), Persistent: true}})
	require.NoError(t, err)

	fault.armed.Store(true)
	recs := []storage.Record{{Body: []byte("b"), Persistent: true}}
	_, err = s.Append(ctx, "q", recs)
	require.ErrorIs(t, err, pebble.ErrFailed)
	require.ErrorIs(t, err, errorfs.ErrInjected)
	require.Zero(t, recs[0].Offset, "a failed Append must not report offsets")
	fault.armed.Store(false)

	// The WAL stays failed: every synced write fails. (An unsynced one
	// may still report success, as it never waits for the WAL; it just
	// never becomes durable.)
	writes := []struct {
		name string
		call func() error
	}{
		{"PersistentAppend", func() error {
			_, err := s.Append(ctx, "q", []storage.Record{{Body: []byte("c"), Persistent: true}})
			return err
		}},
		{"Sync", func() error { return s.Sync(ctx) }},
		{"PersistentAppendOtherShard", func() error {
			_, err := s.Append(ctx, "other", []storage.Record{{Body: []byte("d"), Persistent: true}})
			return err
		}},
	}
	for _, w := range writes {
		require.ErrorIs(t, w.call(), pebble.ErrFailed, w.name)
	}

	// Reads still work and agree with each other. A failed batch may
	// have been applied (Pebble applies before it learns the WAL write
	// failed), so the state is reloaded rather than trusted.
	got, err := s.Read(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	require.Equal(t, []byte("a"), got[0].Body)
	n, err := s.Count(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, uint64(len(got)), n)

	require.Error(t, h.DB.Close(), "closing a DB whose WAL failed")
	h.closed = true
}
