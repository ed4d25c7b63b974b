package unacked_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/unacked"
	"github.com/warrenmq/broker/unacked/indextest"
)

// quiet drops Pebble's informational logging; fatal errors still stop the
// test binary.
type quiet struct{}

func (quiet) Infof(string, ...any)              {}
func (quiet) Errorf(string, ...any)             {}
func (quiet) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func openDB(tb testing.TB) *pebble.DB {
	tb.Helper()
	db, err := pebble.Open(tb.TempDir(), &pebble.Options{Logger: quiet{}})
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

func TestMemoryIndex(t *testing.T) {
	indextest.Run(t, func(t *testing.T) unacked.Index { return unacked.NewMemoryIndex() })
}

func TestPebbleIndex(t *testing.T) {
	indextest.Run(t, func(t *testing.T) unacked.Index { return unacked.NewPebbleIndex(openDB(t)) })
}

// TestPebbleIndexSharedDB checks the index reads only its 'u' keys and
// leaves the other stores' keys alone, DeleteQueue included.
func TestPebbleIndexSharedDB(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	foreign := []string{"t", "s\x01/q", "m\x01/q", "v", "\xff"}
	for _, k := range foreign {
		require.NoError(t, db.Set([]byte(k), []byte("x"), pebble.NoSync))
	}
	x := unacked.NewPebbleIndex(db)
	n := 0
	require.NoError(t, x.Scan(ctx, func(unacked.Entry) bool { n++; return true }))
	require.Zero(t, n)
	e := unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q", Offset: 1}, State: unacked.Delivered}
	require.NoError(t, x.Put(ctx, []unacked.Entry{e}))
	require.NoError(t, x.DeleteQueue(ctx, "/", "q"))
	for _, k := range foreign {
		_, closer, err := db.Get([]byte(k))
		require.NoError(t, err, "key %q", k)
		require.NoError(t, closer.Close())
	}
}

// TestPebbleIndexCorrupt checks damaged records come back as errors, never
// panics, from every read path.
func TestPebbleIndexCorrupt(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		key, value string
	}{
		{"empty-value", "u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01", ""},
		{"unknown-version", "u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01", "\x09"},
		{"truncated", "u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01", "\x01\x05ab"},
		{"bad-state", "u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01", "\x01\x00\x01\x01\x00\x01\x00\x01\x07"},
		{"short-key", "u\x01/\x01q\x01", "\x01\x00\x01\x01\x00\x01\x00\x01\x01"},
		{"long-length", "u\x7f/", "\x01\x00\x01\x01\x00\x01\x00\x01\x01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t)
			require.NoError(t, db.Set([]byte(tt.key), []byte(tt.value), pebble.NoSync))
			x := unacked.NewPebbleIndex(db)
			err := x.Scan(ctx, func(unacked.Entry) bool { return true })
			require.ErrorContains(t, err, "unacked: corrupt")
			if strings.HasPrefix(tt.key, "u\x01/\x01q") {
				err = x.Queue(ctx, "/", "q", func(unacked.Entry) bool { return true })
				require.ErrorContains(t, err, "unacked: corrupt")
			}
		})
	}
	t.Run("get", func(t *testing.T) {
		db := openDB(t)
		require.NoError(t, db.Set([]byte("u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01"), []byte("\x01"), pebble.NoSync))
		_, err := unacked.NewPebbleIndex(db).Get(ctx, unacked.Key{VHost: "/", Queue: "q", Offset: 1})
		require.ErrorContains(t, err, "unacked: corrupt")
	})
}

func TestPebbleIndexNilDB(t *testing.T) {
	x := unacked.NewPebbleIndex(nil)
	err := x.Put(context.Background(), []unacked.Entry{{State: unacked.Delivered}})
	require.ErrorContains(t, err, "unacked: ")
}

func BenchmarkMemoryIndex(b *testing.B) {
	indextest.Bench(b, func(b *testing.B) unacked.Index { return unacked.NewMemoryIndex() })
}

func BenchmarkPebbleIndex(b *testing.B) {
	indextest.Bench(b, func(b *testing.B) unacked.Index { return unacked.NewPebbleIndex(openDB(b)) })
}
