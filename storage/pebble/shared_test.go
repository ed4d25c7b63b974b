package pebble_test

import (
	"context"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/pebble"
)

// TestSharedDB checks the store stays inside its 's' keyspace: the other
// users of the DB (meta/local, the unacked index) never see their keys
// touched, and the store never reads theirs.
func TestSharedDB(t *testing.T) {
	ctx := context.Background()
	h := openDB(t, "db", pebble.WithFS(vfs.NewMem()))
	foreign := map[string]string{
		"m/queue/q":    "meta",
		"u/q/0":        "unacked",
		"r":            "just below s",
		"t":            "just above s",
		"\x00":         "lowest",
		"\xff\xff":     "highest",
		"s":            "bare s",
		"sZZZ":         "s but not a valid shard prefix",
		"\x72\xff\xff": "r with high bytes",
	}
	for k, v := range foreign {
		require.NoError(t, h.Set([]byte(k), []byte(v), cpebble.Sync))
	}
	s := pebble.New(h.DB)
	for _, shard := range []string{"q", "", "ZZ"} {
		_, err := s.Append(ctx, shard, []storage.Record{{Body: []byte("1")}, {Body: []byte("2")}})
		require.NoError(t, err)
		require.NoError(t, s.DeleteByOffsets(ctx, shard, []uint64{0}))
		got, err := s.Read(ctx, shard, 0, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.NoError(t, s.DeleteShard(ctx, shard))
	}
	for k, v := range foreign {
		got, closer, err := h.Get([]byte(k))
		require.NoError(t, err, "key %q of another store was deleted", k)
		require.Equal(t, v, string(got))
		require.NoError(t, closer.Close())
	}

	// Every key the store wrote starts with 's' and nothing else is left.
	it, err := h.NewIter(nil)
	require.NoError(t, err)
	defer it.Close()
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		_, ok := foreign[string(it.Key())]
		require.True(t, ok, "key %q left behind after every shard was deleted", it.Key())
		n++
	}
	require.Equal(t, len(foreign), n)
}

// TestCorrupt checks that damaged data is reported as ErrCorrupt, not
// returned and not a panic.
func TestCorrupt(t *testing.T) {
	ctx := context.Background()
	const (
		stateKey  = "s\x01qm"                                 // shard "q"
		recordKey = "s\x01qr\x00\x00\x00\x00\x00\x00\x00\x00" // offset 0
	)
	goodState := string([]byte{1, 1, 1}) // next 1, count 1
	goodRecord := string([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	read := func(s *pebble.Store) error { _, err := s.Read(ctx, "q", 0, 10); return err }
	tests := []struct {
		name  string
		kvs   map[string]string
		check func(s *pebble.Store) error
	}{
		{"RecordValue", map[string]string{stateKey: goodState, recordKey: "\x09\x09\x09"}, read},
		{"RecordKeyTooLong", map[string]string{stateKey: goodState, recordKey + "\x00": goodRecord}, read},
		{"RecordKeyTooLongFirstOffset", map[string]string{stateKey: goodState, recordKey + "\x00": goodRecord}, func(s *pebble.Store) error {
			_, err := s.FirstOffset(ctx, "q")
			return err
		}},
		{"StateForCount", map[string]string{stateKey: "\x07"}, func(s *pebble.Store) error {
			_, err := s.Count(ctx, "q")
			return err
		}},
		{"StateForAppend", map[string]string{stateKey: "\x01\x01\x02"}, func(s *pebble.Store) error {
			_, err := s.Append(ctx, "q", []storage.Record{{}})
			return err
		}},
		{"StateForDelete", map[string]string{stateKey: ""}, func(s *pebble.Store) error {
			return s.DeleteByOffsets(ctx, "q", []uint64{0})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := openDB(t, "db", pebble.WithFS(vfs.NewMem()))
			for k, v := range tt.kvs {
				require.NoError(t, h.Set([]byte(k), []byte(v), cpebble.NoSync))
			}
			require.ErrorIs(t, tt.check(pebble.New(h.DB)), pebble.ErrCorrupt)
		})
	}
	t.Run("GoodDataReads", func(t *testing.T) {
		// The hand-made good values above really are good.
		h := openDB(t, "db", pebble.WithFS(vfs.NewMem()))
		require.NoError(t, h.Set([]byte(stateKey), []byte(goodState), cpebble.NoSync))
		require.NoError(t, h.Set([]byte(recordKey), []byte(goodRecord), cpebble.NoSync))
		got, err := pebble.New(h.DB).Read(ctx, "q", 0, 10)
		require.NoError(t, err)
		require.Equal(t, []storage.Record{{}}, got)
	})
}

func TestOpen(t *testing.T) {
	t.Run("RejectsDisabledWAL", func(t *testing.T) {
		_, err := pebble.Open("db", pebble.WithFS(vfs.NewMem()), pebble.WithLogger(quiet),
			pebble.WithPebbleOptions(func(o *cpebble.Options) { o.DisableWAL = true }))
		require.ErrorContains(t, err, "WAL")
	})
	t.Run("AppliesPebbleOptionsLast", func(t *testing.T) {
		var seen *cpebble.Options
		h := openDB(t, "db", pebble.WithFS(vfs.NewMem()), pebble.WithMemTableSize(8<<20),
			pebble.WithPebbleOptions(func(o *cpebble.Options) { seen = o }))
		require.NotNil(t, h.DB)
		require.Equal(t, uint64(8<<20), seen.MemTableSize)
		require.Equal(t, cpebble.FormatNewest, seen.FormatMajorVersion)
		require.False(t, seen.DisableWAL)
	})
	t.Run("ErrorWraps", func(t *testing.T) {
		fs := vfs.NewMem()
		h := openDB(t, "db", pebble.WithFS(fs))
		_ = h
		// A second Open of the same directory fails on its lock file.
		_, err := pebble.Open("db", pebble.WithFS(fs), pebble.WithLogger(quiet))
		require.Error(t, err)
		require.ErrorContains(t, err, "storage/pebble: open db")
	})
}
