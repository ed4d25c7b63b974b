package stores

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/meta"
	metalocal "github.com/warrenmq/broker/meta/local"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	pebblestore "github.com/warrenmq/broker/storage/pebble"
	"github.com/warrenmq/broker/unacked"
)

// Config is what Open reads of the broker's Options: the stores given
// (nil: pick one), the data directory and Pebble's memory.
type Config struct {
	DataDir     string
	StoreMemory int64
	Logger      *slog.Logger
	Meta        meta.Store
	Shards      storage.ShardStore
	Unacked     unacked.Index
}

// Set is the broker's stores: the persistent set that durable queues
// and all topology use, and the in-memory set of non-durable queues, which
// vanish at restart as in RabbitMQ and so never pay for a disk write.
type Set struct {
	DB *pebble.DB // opened by the broker when Options.DataDir is set; nil otherwise
	// reserve is db's disk reserve (pebblestore.DiskReserve): released
	// when the disk fills, restored by the disk monitor (alarms.go).
	Reserve *pebblestore.DiskReserve
	// pacer spaces db's fsyncs out under load (pebblestore.SyncPacer).
	pacer pebblestore.SyncPacer
	// reclaimedAt is the WAL's BytesIn at the last reclaim's flush (the
	// disk monitor's goroutine only).
	reclaimedAt uint64
	// shards is the Pebble message store made on db, closed before it;
	// nil when Options.Storage.Shards replaces it.
	shards *pebblestore.Store

	Meta      meta.Store
	Durable   queue.Stores
	Transient queue.Stores
	// shared: Options.Storage.Meta is a store other brokers write too
	// (meta.ChangeFeed), so durable queues are served in shared mode.
	Shared bool
}

// Open picks each store: the one given in Options, else Pebble under
// DataDir, else memory. One Pebble DB holds all three persistent stores
// under their own key prefixes, so its single WAL orders their writes
// (index entry before cursor) without an fsync each. onDiskFull is the
// DB's disk reserve's OnFull: it may run before Open returns; nil
// opens the DB without a reserve (StoredVHosts only reads it).
func Open(o *Config, onDiskFull func(released int64, critical bool)) (*Set, error) {
	_, shared := o.Meta.(meta.ChangeFeed)
	s := &Set{
		Shared: shared,
		Transient: queue.Stores{
			Shards:  memory.New(),
			Cursors: metamemory.New(),
			Index:   unacked.NewMemoryIndex(),
		},
	}
	needDB := o.DataDir != "" && (o.Meta == nil || o.Shards == nil || o.Unacked == nil)
	if needDB {
		if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("broker: Options.DataDir %s cannot be created: %w", o.DataDir, err)
		}
		popts := []pebblestore.Option{pebblestore.WithLogger(o.Logger), pebblestore.WithSyncPacer(&s.pacer)}
		if onDiskFull != nil {
			s.Reserve = &pebblestore.DiskReserve{OnFull: onDiskFull}
			popts = append(popts, pebblestore.WithDiskReserve(s.Reserve))
		}
		if m := o.StoreMemory; m > 0 {
			m = max(m, 4<<20)
			popts = append(popts, pebblestore.WithCacheSize(m), pebblestore.WithMemTableSize(uint64(m/4)))
		}
		db, err := pebblestore.Open(o.DataDir, popts...)
		if err != nil {
			return nil, fmt.Errorf("broker: Options.DataDir: %w", err)
		}
		s.DB = db
	}
	s.Meta = o.Meta
	if s.Meta == nil {
		if s.DB != nil {
			m, err := metalocal.New(s.DB)
			if err != nil {
				s.Close()
				return nil, err
			}
			s.Meta = m
		} else {
			s.Meta = metamemory.New()
		}
	}
	s.Durable.Cursors = s.Meta
	s.Durable.Shards = o.Shards
	if s.Durable.Shards == nil {
		if s.DB != nil {
			s.shards = pebblestore.New(s.DB, pebblestore.GuardedBy(s.Reserve), pebblestore.PacedBy(&s.pacer))
			s.Durable.Shards = s.shards
		} else {
			s.Durable.Shards = memory.New()
		}
	}
	s.Durable.Index = o.Unacked
	if s.Durable.Index == nil {
		if s.DB != nil {
			s.Durable.Index = pebblestore.NewIndex(s.DB)
		} else {
			s.Durable.Index = unacked.NewMemoryIndex()
		}
	}
	return s, nil
}

// Reclaim makes Pebble give back the space of deleted messages while the
// disk is short of it: the acks of a drained queue are tombstones in the
// memtable, and the records they delete stay in sstables until a flush
// and a compaction bring the two together, which Pebble by itself may not
// schedule for a long time on a small database. It flushes the memtable
// (when anything was written since its last flush: a flush rotates the
// WAL) and, when sstables hold tombstones, compacts the whole key space
// (deleted records vanish; what is left is rewritten, which may fail for
// want of space, harmlessly: Pebble drops the output and nothing changes).
func (s *Set) Reclaim(ctx context.Context) error {
	if s.DB == nil {
		return nil
	}
	if in := s.DB.Metrics().WAL.BytesIn; in != s.reclaimedAt {
		if err := s.DB.Flush(); err != nil {
			return err
		}
		s.reclaimedAt = s.DB.Metrics().WAL.BytesIn
	}
	m := s.DB.Metrics()
	if m.Keys.TombstoneCount == 0 && m.Table.Garbage.PointDeletionsBytesEstimate == 0 {
		return nil
	}
	return s.DB.Compact(ctx, []byte{0}, []byte{0xff, 0xff}, false)
}

// Close closes what Open opened; stores passed in Options belong to
// the caller.
func (s *Set) Close() error {
	if s.DB == nil {
		return nil
	}
	if s.shards != nil {
		_ = s.shards.Close() // stops its compactions; never fails
	}
	err := s.DB.Close()
	s.DB = nil
	return err
}

// Fresh reports whether the meta store Open would open holds
// nothing yet: none is given, and DataDir is unset, missing or empty.
func Fresh(o *Config) bool {
	if o.Meta != nil {
		return false
	}
	if o.DataDir == "" {
		return true
	}
	entries, err := os.ReadDir(o.DataDir)
	return errors.Is(err, os.ErrNotExist) || err == nil && len(entries) == 0
}

// StoredVHosts lists the vhosts the meta store Open would open holds,
// for the checks of stored names when other fields are bad already: then it opens
// nothing that New would create. A given Meta store is asked; a DataDir
// that does not exist yet, or is empty, holds none; an existing one is
// opened (and closed again) as Open opens it. Without either the store is
// a fresh memory one.
func StoredVHosts(o *Config) ([]meta.VHost, error) {
	ctx := context.Background()
	if o.Meta != nil {
		vs, err := o.Meta.ListVHosts(ctx)
		if err != nil {
			return nil, fmt.Errorf("broker: Options.Storage.Meta: list vhosts: %w", err)
		}
		return vs, nil
	}
	if Fresh(o) {
		return nil, nil
	}
	st, err := Open(o, nil)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	vs, err := st.Meta.ListVHosts(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker: Options.DataDir: list vhosts: %w", err)
	}
	return vs, nil
}

// VolatileHolds reports whether durable delayed and deduplicating
// exchanges would hold their records in memory while the given stores
// keep durable queues across restarts: the broker opened no Pebble
// database (every store given, or given stores and no Options.DataDir),
// a given Meta or Shards store is not one of the in-memory ones (with
// those a restart loses every durable message alike, and nothing more is
// promised), and the broker is not in shared mode (see openPlugins and
// openDedup). Such
// exchanges are refused at declare, never confirmed and lost.
func (s *Set) VolatileHolds() bool {
	if s.DB != nil {
		return false
	}
	if s.Shared {
		// meta.Records replicates them; without it the accepting node
		// holds them, as docs/exchange-types.md says of a cluster.
		return false
	}
	_, memMeta := s.Meta.(*metamemory.Store)
	_, memShards := s.Durable.Shards.(*memory.Store)
	return !memMeta || !memShards
}

// LogLacks logs at Info each optional interface a store given in c
// lacks, with what the broker does instead (the tables in the meta,
// storage and unacked package documentation). Lacking one is a backend's
// choice and degrades as logged; the ones the broker needs it refuses
// before (a hidden one, unacked.Claimer in shared mode).
func LogLacks(log *slog.Logger, c *Config) {
	logLacks := func(field string, s any, names []string, without func(string) string) {
		for _, n := range names {
			log.Info("broker: a given store lacks an optional interface", "field", "Options.Storage."+field,
				"store", fmt.Sprintf("%T", s), "lacks", n, "so", without(n))
		}
	}
	if o := c.Meta; o != nil {
		logLacks("Meta", o, meta.Lacks(o), func(n string) string {
			return capabilityWithout(meta.Capabilities, n, func(c meta.Capability) (string, string) { return c.Name, c.Without })
		})
	}
	if o := c.Shards; o != nil {
		logLacks("Shards", o, storage.Lacks(o), func(n string) string {
			return capabilityWithout(storage.Capabilities, n, func(c storage.Capability) (string, string) { return c.Name, c.Without })
		})
	}
	if o := c.Unacked; o != nil {
		logLacks("Unacked", o, unacked.Lacks(o), func(n string) string {
			return capabilityWithout(unacked.Capabilities, n, func(c unacked.Capability) (string, string) { return c.Name, c.Without })
		})
	}
}

// capabilityWithout returns the Without text of the capability named n.
func capabilityWithout[C any](cs []C, n string, f func(C) (name, without string)) string {
	for _, c := range cs {
		if name, w := f(c); name == n {
			return w
		}
	}
	return ""
}
