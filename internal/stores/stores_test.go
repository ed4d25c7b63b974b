package stores

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	metalocal "github.com/warrenmq/broker/meta/local"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	pebblestore "github.com/warrenmq/broker/storage/pebble"
	"github.com/warrenmq/broker/unacked"
)

// hiddenMeta is a meta store that is not one of the in-memory ones (a
// wrapper that forwards Store's methods only).
type hiddenMeta struct{ meta.Store }

// TestOpenPicks: each store is the one given, else Pebble under the data
// directory, else memory; the DB is opened only when some store needs it.
func TestOpenPicks(t *testing.T) {
	givenMeta, givenShards, givenIndex := metamemory.New(), memory.New(), unacked.NewMemoryIndex()
	type picked struct{ db, meta, shards, index string }
	for _, tc := range []struct {
		name    string
		dataDir bool
		cfg     Config
		want    picked
	}{
		{"nothing: memory", false, Config{}, picked{"none", "memory", "memory", "memory"}},
		{"a data directory: Pebble", true, Config{}, picked{"open", "local", "pebble", "pebble"}},
		{"every store given, with a data directory", true, Config{Meta: givenMeta, Shards: givenShards, Unacked: givenIndex},
			picked{"none", "given", "given", "given"}},
		{"the meta store given", true, Config{Meta: givenMeta}, picked{"open", "given", "pebble", "pebble"}},
		{"the shards given, no data directory", false, Config{Shards: givenShards}, picked{"none", "memory", "given", "memory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if tc.dataDir {
				cfg.DataDir = filepath.Join(t.TempDir(), "data")
			}
			s, err := Open(&cfg, nil)
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			var got picked
			got.db = "none"
			if s.DB != nil {
				got.db = "open"
			}
			switch m := s.Meta.(type) {
			case *metamemory.Store:
				got.meta = "memory"
				if m == givenMeta {
					got.meta = "given"
				}
			case *metalocal.Store:
				got.meta = "local"
			}
			switch sh := s.Durable.Shards.(type) {
			case *memory.Store:
				got.shards = "memory"
				if sh == givenShards {
					got.shards = "given"
				}
			case *pebblestore.Store:
				got.shards = "pebble"
			}
			switch x := s.Durable.Index.(type) {
			case *unacked.MemoryIndex:
				got.index = "memory"
				if x == givenIndex {
					got.index = "given"
				}
			default:
				got.index = "pebble"
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, s.Meta, s.Durable.Cursors, "cursors live in the meta store")
			require.NotNil(t, s.Transient.Shards)
			require.NotSame(t, s.Transient.Shards, s.Durable.Shards, "transient queues never share the durable shards")
			require.NoError(t, s.Reclaim(context.Background()))
		})
	}
}

// TestCloseLeavesGivenStores: Close closes what Open opened, never a
// store the caller gave.
func TestCloseLeavesGivenStores(t *testing.T) {
	ctx := context.Background()
	given := metamemory.New()
	s, err := Open(&Config{DataDir: t.TempDir(), Meta: given}, nil)
	require.NoError(t, err)
	require.NotNil(t, s.DB)
	require.NoError(t, s.Close())
	require.Nil(t, s.DB)
	require.NoError(t, s.Close(), "a second Close has nothing left to close")
	require.NoError(t, given.PutVHost(ctx, meta.VHost{Name: "v"}), "the given store still serves")
}

func TestFresh(t *testing.T) {
	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "f"), nil, 0o644))
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"no data directory", Config{}, true},
		{"a data directory not made yet", Config{DataDir: filepath.Join(t.TempDir(), "missing")}, true},
		{"an empty data directory", Config{DataDir: t.TempDir()}, true},
		{"a data directory with files", Config{DataDir: full}, false},
		{"a meta store given", Config{Meta: metamemory.New()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Fresh(&tc.cfg))
		})
	}
}

// TestStoredVHosts: the vhosts of a data directory written before are
// read (and the DB closed again), a given store is asked, a fresh
// directory is left as it was.
func TestStoredVHosts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(&Config{DataDir: dir}, nil)
	require.NoError(t, err)
	require.NoError(t, s.Meta.PutVHost(ctx, meta.VHost{Name: "stored"}))
	require.NoError(t, s.Close())
	given := metamemory.New()
	require.NoError(t, given.PutVHost(ctx, meta.VHost{Name: "given"}))
	missing := filepath.Join(t.TempDir(), "missing")

	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"a data directory written before", Config{DataDir: dir}, []string{"stored"}},
		{"a given store", Config{Meta: given, DataDir: dir}, []string{"given"}},
		{"a data directory not made yet", Config{DataDir: missing}, nil},
		{"memory", Config{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := StoredVHosts(&tc.cfg)
			require.NoError(t, err)
			var names []string
			for _, v := range vs {
				names = append(names, v.Name)
			}
			require.Equal(t, tc.want, names)
		})
	}
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist, "reading creates nothing")
	// The DB was closed again: it opens.
	s, err = Open(&Config{DataDir: dir}, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// TestVolatileHolds: durable delayed and deduplicating exchanges are
// refused only when durable queues survive a restart and the holds would
// not: no Pebble DB, not shared, a given store that is not in memory.
func TestVolatileHolds(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		dir  bool
		want bool
	}{
		{"Pebble", Config{}, true, false},
		{"memory", Config{}, false, false},
		{"a given meta store not in memory", Config{Meta: hiddenMeta{metamemory.New()}}, false, true},
		{"given stores not in memory, with a data directory unused", Config{Meta: hiddenMeta{metamemory.New()},
			Shards: shardsOnly{memory.New()}, Unacked: unacked.NewMemoryIndex()}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if tc.dir {
				cfg.DataDir = t.TempDir()
			}
			s, err := Open(&cfg, nil)
			require.NoError(t, err)
			defer s.Close()
			require.Equal(t, tc.want, s.VolatileHolds())
		})
	}
}

// shardsOnly is a shard store that is not the in-memory one.
type shardsOnly struct{ storage.ShardStore }

// TestLogLacks: each optional interface a given store lacks is logged
// once, with what the broker does instead.
func TestLogLacks(t *testing.T) {
	m := hiddenMeta{metamemory.New()}
	lacks := meta.Lacks(m)
	require.NotEmpty(t, lacks, "a wrapper of Store alone lacks the optional interfaces")
	var buf bytes.Buffer
	LogLacks(slog.New(slog.NewTextHandler(&buf, nil)), &Config{Meta: m})
	out := buf.String()
	for _, c := range meta.Capabilities {
		require.Contains(t, out, "lacks="+c.Name)
		require.Contains(t, out, c.Without[:20])
	}
	require.Equal(t, len(lacks), bytes.Count(buf.Bytes(), []byte("\n")))

	buf.Reset()
	LogLacks(slog.New(slog.NewTextHandler(&buf, nil)), &Config{})
	require.Empty(t, buf.String(), "no store given: nothing to say")
}
