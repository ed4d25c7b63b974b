package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	metalocal "github.com/warrenmq/broker/meta/local"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage/memory"
	pebblestore "github.com/warrenmq/broker/storage/pebble"
	"github.com/warrenmq/broker/unacked"
)

// stores are the broker's stores: the persistent set that durable queues
// and all topology use, and the in-memory set of non-durable queues, which
// vanish at restart as in RabbitMQ and so never pay for a disk write.
type stores struct {
	db *pebble.DB // opened by the broker when Options.DataDir is set; nil otherwise
	// reserve is db's disk reserve (pebblestore.DiskReserve): released
	// when the disk fills, restored by the disk monitor (alarms.go).
	reserve *pebblestore.DiskReserve
	// reclaimedAt is the WAL's BytesIn at the last reclaim's flush (the
	// disk monitor's goroutine only).
	reclaimedAt uint64
	// shards is the Pebble message store made on db, closed before it;
	// nil when Options.Shards replaces it.
	shards *pebblestore.Store

	meta      meta.Store
	durable   queue.Stores
	transient queue.Stores
	// shared: Options.Meta is a store other brokers write too
	// (meta.ChangeFeed), so durable queues are served in shared mode.
	shared bool
}

// openStores picks each store: the one given in Options, else Pebble under
// DataDir, else memory. One Pebble DB holds all three persistent stores
// under their own key prefixes, so its single WAL orders their writes
// (index entry before cursor) without an fsync each. onDiskFull is the
// DB's disk reserve's OnFull: it may run before openStores returns.
func openStores(o *Options, onDiskFull func(released int64, critical bool)) (*stores, error) {
	_, shared := o.Meta.(meta.ChangeFeed)
	s := &stores{
		shared: shared,
		transient: queue.Stores{
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
		s.reserve = &pebblestore.DiskReserve{OnFull: onDiskFull}
		popts := []pebblestore.Option{pebblestore.WithLogger(o.Logger), pebblestore.WithDiskReserve(s.reserve)}
		if m := o.StoreMemory; m > 0 {
			m = max(m, 4<<20)
			popts = append(popts, pebblestore.WithCacheSize(m), pebblestore.WithMemTableSize(uint64(m/4)))
		}
		db, err := pebblestore.Open(o.DataDir, popts...)
		if err != nil {
			return nil, fmt.Errorf("broker: Options.DataDir: %w", err)
		}
		s.db = db
	}
	s.meta = o.Meta
	if s.meta == nil {
		if s.db != nil {
			m, err := metalocal.New(s.db)
			if err != nil {
				s.close()
				return nil, err
			}
			s.meta = m
		} else {
			s.meta = metamemory.New()
		}
	}
	s.durable.Cursors = s.meta
	s.durable.Shards = o.Shards
	if s.durable.Shards == nil {
		if s.db != nil {
			s.shards = pebblestore.New(s.db, pebblestore.GuardedBy(s.reserve))
			s.durable.Shards = s.shards
		} else {
			s.durable.Shards = memory.New()
		}
	}
	s.durable.Index = o.Unacked
	if s.durable.Index == nil {
		if s.db != nil {
			s.durable.Index = pebblestore.NewIndex(s.db)
		} else {
			s.durable.Index = unacked.NewMemoryIndex()
		}
	}
	return s, nil
}

// reclaim makes Pebble give back the space of deleted messages while the
// disk is short of it: the acks of a drained queue are tombstones in the
// memtable, and the records they delete stay in sstables until a flush
// and a compaction bring the two together, which Pebble by itself may not
// schedule for a long time on a small database. It flushes the memtable
// (when anything was written since its last flush: a flush rotates the
// WAL) and, when sstables hold tombstones, compacts the whole key space
// (deleted records vanish; what is left is rewritten, which may fail for
// want of space, harmlessly: Pebble drops the output and nothing changes).
func (s *stores) reclaim(ctx context.Context) error {
	if s.db == nil {
		return nil
	}
	if in := s.db.Metrics().WAL.BytesIn; in != s.reclaimedAt {
		if err := s.db.Flush(); err != nil {
			return err
		}
		s.reclaimedAt = s.db.Metrics().WAL.BytesIn
	}
	m := s.db.Metrics()
	if m.Keys.TombstoneCount == 0 && m.Table.Garbage.PointDeletionsBytesEstimate == 0 {
		return nil
	}
	return s.db.Compact(ctx, []byte{0}, []byte{0xff, 0xff}, false)
}

// close closes what openStores opened; stores passed in Options belong to
// the caller.
func (s *stores) close() error {
	if s.db == nil {
		return nil
	}
	if s.shards != nil {
		_ = s.shards.Close() // stops its compactions; never fails
	}
	err := s.db.Close()
	s.db = nil
	return err
}

// shardName names a queue's shard: vhost and queue, NUL-separated (neither
// may contain NUL on the wire's short strings in practice, and the split is
// only for humans reading keys).
func shardName(vh, name string) string { return vh + "\x00" + name }

// startQueue starts the actor of a declared queue on the stores its
// durability calls for. In shared mode a durable queue is shared with the
// other brokers, and its transient messages are not dropped at start: a
// restart of this broker is not a restart of the queue.
func (b *Broker) startQueue(ctx context.Context, def meta.Queue, features queue.Features) (*queue.Queue, error) {
	st := b.stores.transient
	if def.Durable {
		st = b.stores.durable
	}
	shared := b.shared() && def.Durable
	if err := b.dedupQueue(ctx, def, shared, &st, &features); err != nil {
		return nil, err
	}
	return queue.Start(ctx, queue.Config{
		VHost:         def.VHost,
		Name:          def.Name,
		Shard:         shardName(def.VHost, def.Name),
		Stores:        st,
		Shared:        shared,
		DropTransient: def.Durable && !shared,
		OwnCursor:     !def.Durable,
		Broker:        b.nodeID,
		Incarnation:   b.incarnation,
		Clock:         b.opts.Clock,
		Features:      features,
		Logger:        b.log,
		Totals:        &b.counters.queues,
		Events:        b.events,
	})
}

// openVHosts opens every configured vhost and every vhost stored by
// addVHost (accounts.go), each with its durable topology.
func (b *Broker) openVHosts(ctx context.Context) error {
	b.vhostsMu.Lock()
	defer b.vhostsMu.Unlock()
	b.vhosts = make(map[string]*vhost.VHost, len(b.opts.VHosts))
	if err := b.readVHostLimits(ctx); err != nil {
		return err
	}
	names := make([]string, 0, len(b.opts.VHosts))
	for _, name := range b.opts.VHosts {
		names = append(names, canonicalVHost(name))
	}
	stored, err := b.stores.meta.ListVHosts(ctx)
	if err != nil {
		return fmt.Errorf("broker: list vhosts: %w", err)
	}
	records := make(map[string]meta.VHost, len(stored))
	for _, v := range stored {
		name := canonicalVHost(v.Name)
		names = append(names, name)
		v.Name = name
		records[name] = v
	}
	for _, name := range names {
		if _, ok := b.vhosts[name]; ok {
			continue
		}
		rec, ok := records[name]
		if !ok {
			rec = meta.VHost{Name: name}
		}
		if err := b.openVHostLocked(ctx, rec, true); err != nil {
			b.closeVHostsLocked()
			return err
		}
	}
	return nil
}

// checkVHostLimits refuses a VHostMaxConnections entry for a vhost that
// neither Options.VHosts nor the meta store has: it would never apply.
// It runs in New once the vhosts are open.
func (b *Broker) checkVHostLimits() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(b.opts.VHostMaxConnections)) {
		if _, ok := b.lookupVHost(name); !ok {
			errs = append(errs, fmt.Errorf("broker: Options.VHostMaxConnections[%q]: no such vhost (add it to Options.VHosts)", name))
		}
	}
	return errors.Join(errs...)
}

// openVHostLocked stores rec (when store is set) and opens its vhost
// with rec's settings; b.vhostsMu is held. Shared mode opens vhosts another
// broker stored without storing them again: they may be being deleted.
func (b *Broker) openVHostLocked(ctx context.Context, rec meta.VHost, store bool) error {
	name := rec.Name
	if store {
		if err := b.stores.meta.PutVHost(ctx, rec); err != nil {
			return err
		}
	}
	policies, err := b.policySet(ctx, name)
	if err != nil {
		return fmt.Errorf("broker: open vhost %q: policies: %w", name, err)
	}
	vh, err := vhost.Open(ctx, vhost.Config{
		Policies:         policies,
		Name:             name,
		Store:            b.stores.meta,
		StartQueue:       b.startQueue,
		MaxQueues:        b.opts.MaxQueuesPerVHost,
		MaxArgumentsSize: vhost.ArgumentsSizeFor(b.opts.FrameMax),
		Logger:           b.log,
		Shared:           b.shared(),
		Profile:          b.opts.profile(),
		Delayed:          b.plugins.delayed,
		Dedup:            b.openDedup,
		VolatileHolds:    b.volatileHolds(),
		ReplyTag:         b.replyTag(),
		Replies:          b.opts.Replies,
	})
	if err != nil {
		return fmt.Errorf("broker: open vhost %q: %w", name, err)
	}
	vh.SetDefaultQueueType(rec.DefaultQueueType)
	b.applyQueueLimit(vh)
	b.vhosts[name] = vh
	return nil
}

func (b *Broker) closeVHosts() {
	b.vhostsMu.Lock()
	defer b.vhostsMu.Unlock()
	b.closeVHostsLocked()
}

func (b *Broker) closeVHostsLocked() {
	for _, vh := range b.vhosts {
		vh.Close()
	}
}

// lookupVHost serves connection.open and every other lookup by name.
func (b *Broker) lookupVHost(name string) (*vhost.VHost, bool) {
	b.vhostsMu.RLock()
	defer b.vhostsMu.RUnlock()
	vh, ok := b.vhosts[canonicalVHost(name)]
	return vh, ok
}

// shared reports whether the broker runs in shared mode (shared.go).
func (b *Broker) shared() bool { return b.stores.shared }

// volatileHolds reports whether durable delayed and deduplicating
// exchanges would hold their records in memory while the given stores
// keep durable queues across restarts: the broker opened no Pebble
// database (every store given, or given stores and no Options.DataDir),
// a given Meta or Shards store is not one of the in-memory ones (with
// those a restart loses every durable message alike, and nothing more is
// promised), and the broker is not in shared mode (see openPlugins and
// openDedup). Such
// exchanges are refused at declare, never confirmed and lost.
func (b *Broker) volatileHolds() bool {
	if b.stores.db != nil {
		return false
	}
	if b.shared() {
		// meta.Records replicates them; without it the accepting node
		// holds them, as docs/exchange-types.md says of a cluster.
		return false
	}
	_, memMeta := b.stores.meta.(*metamemory.Store)
	_, memShards := b.stores.durable.Shards.(*memory.Store)
	return !memMeta || !memShards
}
