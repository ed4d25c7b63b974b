package pebble

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// TestSyncPacer checks that a Store paced by p counts the persistent
// records it syncs, and that Pebble is told to wait only after a sync
// that covered PacedRecords or more.
func TestSyncPacer(t *testing.T) {
	tests := []struct {
		name       string
		persistent bool
		n          int
		want       bool // the next sync waits PacedInterval
	}{
		{"one persistent record", true, 1, false},
		{"a small batch", true, PacedRecords - 1, false},
		{"a batch under load", true, PacedRecords, true},
		{"transient records are not synced", false, 10 * PacedRecords, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p SyncPacer
			// The DB is not paced, so Pebble never takes the count
			// before the test reads it.
			db, err := Open(t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, db.Close()) })
			s := New(db, PacedBy(&p))
			t.Cleanup(func() { require.NoError(t, s.Close()) })
			recs := make([]storage.Record, tt.n)
			for i := range recs {
				recs[i] = storage.Record{Body: []byte("m"), Persistent: tt.persistent}
			}
			_, err = s.Append(context.Background(), "/q", recs)
			require.NoError(t, err)
			want := int64(0)
			if tt.persistent {
				want = int64(tt.n)
			}
			require.Equal(t, want, p.pending.Load())
			require.Equal(t, tt.want, p.interval() == PacedInterval)
			require.Zero(t, p.interval(), "a sync with nothing new waits for nothing")
		})
	}
}

// TestSyncPacerOpen checks that a paced DB still syncs what it must: a
// persistent Append returns, and survives reopening.
func TestSyncPacerOpen(t *testing.T) {
	var p SyncPacer
	dir := t.TempDir()
	db, err := Open(dir, WithSyncPacer(&p))
	require.NoError(t, err)
	s := New(db, PacedBy(&p))
	recs := make([]storage.Record, 2*PacedRecords)
	for i := range recs {
		recs[i] = storage.Record{Body: []byte("m"), Persistent: true}
	}
	ctx := context.Background()
	for range 3 {
		_, err = s.Append(ctx, "/q", recs)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	require.NoError(t, db.Close())
	db, err = Open(dir)
	require.NoError(t, err)
	defer db.Close()
	n, err := New(db).Count(ctx, "/q")
	require.NoError(t, err)
	require.EqualValues(t, 3*len(recs), n)
}
