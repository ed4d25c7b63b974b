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
	"github.com/warrenmq/broker/storage"
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
// DB's disk reserve's OnFull: it may run before openStores returns; nil
// opens the DB without a reserve (storedVHosts only reads it).
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
		popts := []pebblestore.Option{pebblestore.WithLogger(o.Logger)}
		if onDiskFull != nil {
			s.reserve = &pebblestore.DiskReserve{OnFull: onDiskFull}
			popts = append(popts, pebblestore.WithDiskReserve(s.reserve))
		}
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

// checkStoredNames refuses the Options fields that name a vhost neither
// Options.VHosts nor the meta store has: a VHostMaxConnections entry
// would never apply, a policy could not be stored. stored lists the
// store's vhosts (nil: it holds none). New runs it with the static checks
// (Options.validate), so every bad field comes back in one error.
func (o *Options) checkStoredNames(stored []meta.VHost) error {
	known := make(map[string]bool, len(o.VHosts)+len(stored))
	for _, v := range o.VHosts {
		known[canonicalVHost(v)] = true
	}
	for _, v := range stored {
		known[canonicalVHost(v.Name)] = true
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(o.VHostMaxConnections)) {
		if !known[name] {
			errs = append(errs, fmt.Errorf("broker: Options.VHostMaxConnections[%q]: no such vhost (add it to Options.VHosts)", name))
		}
	}
	for _, set := range []struct {
		ps    []Policy
		field string
	}{{o.Policies, "Policies"}, {o.OperatorPolicies, "OperatorPolicies"}} {
		for i, p := range set.ps {
			if vh := canonicalVHost(p.VHost); !known[vh] {
				errs = append(errs, fmt.Errorf("broker: Options.%s[%d] (%q): no such vhost %q (add it to Options.VHosts)", set.field, i, p.Name, vh))
			}
		}
	}
	return errors.Join(errs...)
}

// freshStores reports whether the meta store New would open holds
// nothing yet: none is given, and DataDir is unset, missing or empty.
func freshStores(o *Options) bool {
	if o.Meta != nil {
		return false
	}
	if o.DataDir == "" {
		return true
	}
	entries, err := os.ReadDir(o.DataDir)
	return errors.Is(err, os.ErrNotExist) || err == nil && len(entries) == 0
}

// checkStores runs, once the stores are open, the checks of Options
// against what the meta store holds (checkStoredNames), and logs at Info
// each optional interface a store given in Options lacks, with what the
// broker does instead (the tables in the meta, storage and unacked
// package documentation). Lacking one is a backend's choice and degrades
// as logged; the ones Options need are refused by validate (a hidden one,
// unacked.Claimer in shared mode).
func (b *Broker) checkStores() error {
	vs, err := b.stores.meta.ListVHosts(context.Background())
	if err != nil {
		return fmt.Errorf("broker: list vhosts: %w", err)
	}
	if err := b.opts.checkStoredNames(vs); err != nil {
		return err
	}
	logLacks := func(field string, s any, names []string, without func(string) string) {
		for _, n := range names {
			b.log.Info("broker: a given store lacks an optional interface", "field", "Options."+field,
				"store", fmt.Sprintf("%T", s), "lacks", n, "so", without(n))
		}
	}
	if o := b.opts.Meta; o != nil {
		logLacks("Meta", o, meta.Lacks(o), func(n string) string {
			return capabilityWithout(meta.Capabilities, n, func(c meta.Capability) (string, string) { return c.Name, c.Without })
		})
	}
	if o := b.opts.Shards; o != nil {
		logLacks("Shards", o, storage.Lacks(o), func(n string) string {
			return capabilityWithout(storage.Capabilities, n, func(c storage.Capability) (string, string) { return c.Name, c.Without })
		})
	}
	if o := b.opts.Unacked; o != nil {
		logLacks("Unacked", o, unacked.Lacks(o), func(n string) string {
			return capabilityWithout(unacked.Capabilities, n, func(c unacked.Capability) (string, string) { return c.Name, c.Without })
		})
	}
	return nil
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

// storedVHosts lists the vhosts the meta store New would open holds,
// for checkStoredNames when other fields are bad already: then it opens
// nothing that New would create. A given Meta store is asked; a DataDir
// that does not exist yet, or is empty, holds none; an existing one is
// opened (and closed again) as New opens it. Without either the store is
// a fresh memory one.
func storedVHosts(o *Options) ([]meta.VHost, error) {
	ctx := context.Background()
	if o.Meta != nil {
		vs, err := o.Meta.ListVHosts(ctx)
		if err != nil {
			return nil, fmt.Errorf("broker: Options.Meta: list vhosts: %w", err)
		}
		return vs, nil
	}
	if freshStores(o) {
		return nil, nil
	}
	st, err := openStores(o, nil)
	if err != nil {
		return nil, err
	}
	defer st.close()
	vs, err := st.meta.ListVHosts(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker: Options.DataDir: list vhosts: %w", err)
	}
	return vs, nil
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
