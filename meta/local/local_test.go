package local_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
	"github.com/warrenmq/broker/meta/local"
	"github.com/warrenmq/broker/meta/metatest"
)

// quiet drops Pebble's informational logging ("Found 0 WALs") so test and
// benchmark output stays readable; fatal errors still stop the test binary.
type quiet struct{}

func (quiet) Infof(string, ...any)              {}
func (quiet) Errorf(string, ...any)             {}
func (quiet) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// openDB opens a Pebble DB in dir on fs and closes it at cleanup.
func openDB(tb testing.TB, dir string, fs vfs.FS) *pebble.DB {
	tb.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, Logger: quiet{}})
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

func newStore(tb testing.TB, db *pebble.DB) *local.Store {
	tb.Helper()
	s, err := local.New(db)
	require.NoError(tb, err)
	return s
}

func TestConformance(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store {
		return newStore(t, openDB(t, t.TempDir(), vfs.Default))
	}, metatest.Without("meta.ChangeFeed", "meta.Records", "meta.Replicated"))
}

func TestPersistence(t *testing.T) {
	metatest.RunPersistence(t, func(t *testing.T) (meta.Store, func() meta.Store) {
		dir := t.TempDir()
		open := func() *pebble.DB {
			db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
			require.NoError(t, err)
			return db
		}
		db := open()
		t.Cleanup(func() { require.NoError(t, db.Close()) }) // the last one opened
		reopen := func() meta.Store {
			require.NoError(t, db.Close())
			db = open()
			return newStore(t, db)
		}
		return newStore(t, db), reopen
	})
}

// TestCrash checks what a crash keeps: only synced data survives in a crash
// clone of the file system, so every durable write must have been synced.
func TestCrash(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quiet{}})
	require.NoError(t, err)
	s := newStore(t, db)

	durableQ := meta.Queue{VHost: "/", Name: "durable", Durable: true}
	require.NoError(t, s.PutQueue(ctx, durableQ))
	require.NoError(t, s.PutQueue(ctx, meta.Queue{VHost: "/", Name: "durable-then-deleted", Durable: true}))
	require.NoError(t, s.PutExchange(ctx, meta.Exchange{VHost: "/", Name: "x", Type: "direct", Durable: true}))
	require.NoError(t, s.PutBinding(ctx, meta.Binding{VHost: "/", Source: "x", Destination: "durable",
		DestinationKind: meta.DestinationQueue, Durable: true}))
	require.NoError(t, s.PutVHost(ctx, meta.VHost{Name: "/"}))
	require.NoError(t, s.PutUser(ctx, meta.User{Name: "guest"}))
	require.NoError(t, s.PutPermission(ctx, meta.Permission{User: "guest", VHost: "/"}))
	// Last, so no later synced write carries it to disk.
	require.NoError(t, s.DeleteQueue(ctx, "/", "durable-then-deleted"))

	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // exactly what was synced
	require.NoError(t, db.Close())
	db, err = pebble.Open("db", &pebble.Options{FS: crashed, Logger: quiet{}})
	require.NoError(t, err)
	defer db.Close()
	s = newStore(t, db)

	got, err := s.GetQueue(ctx, "/", "durable")
	require.NoError(t, err)
	require.Equal(t, durableQ, got)
	_, err = s.GetQueue(ctx, "/", "durable-then-deleted")
	require.ErrorIs(t, err, meta.ErrNotFound, "deleting a durable queue is synced too")
	_, err = s.GetExchange(ctx, "/", "x")
	require.NoError(t, err)
	bindings, err := s.ListBindings(ctx, "/")
	require.NoError(t, err)
	require.Len(t, bindings, 1)
	_, err = s.GetVHost(ctx, "/")
	require.NoError(t, err)
	_, err = s.GetUser(ctx, "guest")
	require.NoError(t, err)
	_, err = s.GetPermission(ctx, "guest", "/")
	require.NoError(t, err)
}

// TestSharedDB checks the store ignores keys outside its 'm' prefix, as the
// storage and unacked stores write theirs into the same DB.
func TestSharedDB(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir(), vfs.Default)
	for _, k := range []string{"l", "n", "s\x01q", "u\x01/\x01q", "m", "ma"} {
		require.NoError(t, db.Set([]byte(k), []byte("not json"), pebble.NoSync))
	}
	s := newStore(t, db)
	vhosts, err := s.ListVHosts(ctx)
	require.NoError(t, err)
	require.Empty(t, vhosts)
	require.NoError(t, s.PutQueue(ctx, meta.Queue{VHost: "/", Name: "q"}))
	queues, err := s.ListQueues(ctx, "/")
	require.NoError(t, err)
	require.Len(t, queues, 1)
}

func TestNew(t *testing.T) {
	t.Run("nil-db", func(t *testing.T) {
		_, err := local.New(nil)
		require.Error(t, err)
	})
	tests := []struct {
		name    string
		version []byte
	}{
		{"future-version", binary.AppendUvarint(nil, 2)},
		{"garbage-version", []byte{0x80}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t, t.TempDir(), vfs.Default)
			require.NoError(t, db.Set([]byte("m!"), tt.version, pebble.Sync))
			_, err := local.New(db)
			require.ErrorContains(t, err, "local: ")
		})
	}
	t.Run("reopen-same-version", func(t *testing.T) {
		db := openDB(t, t.TempDir(), vfs.Default)
		newStore(t, db)
		newStore(t, db)
	})
}

// TestCorrupt checks that damaged values come back as errors, not panics.
func TestCorrupt(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir(), vfs.Default)
	s := newStore(t, db)
	require.NoError(t, s.PutQueue(ctx, meta.Queue{VHost: "/", Name: "q"}))
	ok, err := s.CompareAndSwapOffset(ctx, meta.QueueKey{VHost: "/", Name: "c"}, 0, 1)
	require.NoError(t, err)
	require.True(t, ok)

	// Overwrite the queue and a cursor behind the store's back; the cursor
	// the store has not loaded yet is read from the DB.
	require.NoError(t, db.Set([]byte("mq\x01/q"), []byte("{"), pebble.NoSync))
	require.NoError(t, db.Set([]byte("mc\x01/d"), []byte{1, 2, 3}, pebble.NoSync))

	_, err = s.GetQueue(ctx, "/", "q")
	require.ErrorContains(t, err, `meta: corrupt queue under key "mq\x01/q"`)
	_, err = s.ListQueues(ctx, "/")
	require.ErrorContains(t, err, `meta: corrupt queue under key "mq\x01/q"`)
	_, err = s.Offset(ctx, meta.QueueKey{VHost: "/", Name: "d"})
	require.ErrorContains(t, err, "local: corrupt cursor")
	_, err = s.CompareAndSwapOffset(ctx, meta.QueueKey{VHost: "/", Name: "d"}, 0, 1)
	require.ErrorContains(t, err, "local: corrupt cursor")
}

func BenchmarkCompareAndSwapOffset(b *testing.B) {
	metatest.Bench(b, func(b *testing.B) meta.Store {
		return newStore(b, openDB(b, b.TempDir(), vfs.Default))
	})
}

// A vhost record written before vhosts had metadata (the JSON of a
// meta.VHost with only a Name) still reads, as a vhost without metadata.
func TestVHostRecordWithoutMetadata(t *testing.T) {
	db := openDB(t, t.TempDir(), vfs.NewMem())
	s := newStore(t, db)
	require.NoError(t, db.Set(metakey.VHost("old"), []byte(`{"Name":"old"}`), pebble.Sync))
	got, err := s.GetVHost(context.Background(), "old")
	require.NoError(t, err)
	require.Equal(t, meta.VHost{Name: "old"}, got)
	all, err := s.ListVHosts(context.Background())
	require.NoError(t, err)
	require.Equal(t, []meta.VHost{{Name: "old"}}, all)
}
