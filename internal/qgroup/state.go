package qgroup

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/internal/multiraft"
)

// state is one queue's replicated state on this member, its group's
// multiraft.StateMachine. Its records and unacked entries are on disk, in
// the group's range of the member's Pebble database (multiraft.Data);
// memory holds only the queue's counters and its unacked entries, which
// its consumers' prefetch bounds. The group's applier writes it; the
// queue's actor and the management API read it.
//
// The keys under the group's prefix:
//
//	"m"             the counters: metaVersion, next offset, cursor, live
//	                record count, lowest live offset (uvarints)
//	"r" offset (8)  a live record (codec.AppendRecord, without its offset)
//	"u" offset (8)  an unacked entry (codec.AppendEntry)
type state struct {
	key   meta.QueueKey
	shard string
	feed  *feed

	mu      sync.RWMutex
	data    *multiraft.Data // nil until the engine loads the group here
	next    uint64
	cursor  uint64
	live    uint64 // live records
	first   uint64 // no live record below it (next when live is 0)
	entries map[uint64]unacked.Entry
	// changes are what the applies since the last Committed tell the
	// feed, once their writes are readable; reset a Restore's.
	changes []meta.Change
	reset   bool
}

func newState(key meta.QueueKey, f *feed) *state {
	return &state{key: key, shard: ShardName(key), feed: f, entries: map[uint64]unacked.Entry{}}
}

// ShardName is the shard the broker gives queue k (its vhost and name,
// NUL-separated).
func ShardName(k meta.QueueKey) string { return k.VHost + "\x00" + k.Name }

var boolResult = [2][]byte{{0}, {1}}

const (
	keyMeta     = 'm'
	keyRecord   = 'r'
	keyEntry    = 'u'
	metaVersion = 1
)

var metaKey = []byte{keyMeta}

func offsetKey(prefix byte, off uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefix}, off)
}

// counters is what the "m" key holds.
type counters struct{ next, cursor, count, first uint64 }

func encodeCounters(c counters) []byte {
	e := encoder{b: []byte{metaVersion}}
	e.u(c.next)
	e.u(c.cursor)
	e.u(c.count)
	e.u(c.first)
	return e.b
}

func decodeCounters(b []byte) (counters, error) {
	if len(b) == 0 || b[0] != metaVersion {
		return counters{}, errors.New("qgroup: unknown version of a queue's counters")
	}
	d := decoder{b: b[1:]}
	c := counters{next: d.u(), cursor: d.u(), count: d.u(), first: d.u()}
	if err := d.done(); err != nil {
		return counters{}, fmt.Errorf("qgroup: a queue's counters: %w", err)
	}
	if c.count > c.next || c.first > c.next {
		return counters{}, fmt.Errorf("qgroup: a queue's counters are inconsistent (next %d, count %d, first %d)", c.next, c.count, c.first)
	}
	return c, nil
}

// Load reads the counters and the unacked entries from d.
func (s *state) Load(d *multiraft.Data) error {
	var c counters
	v, ok, err := d.Get(metaKey)
	if err != nil {
		return err
	}
	if ok {
		if c, err = decodeCounters(v); err != nil {
			return fmt.Errorf("queue %q: %w", s.key.Name, err)
		}
	}
	entries := map[uint64]unacked.Entry{}
	var derr error
	err = d.Scan([]byte{keyEntry}, []byte{keyEntry + 1}, func(k, v []byte) bool {
		if len(k) != 9 {
			derr = fmt.Errorf("qgroup: queue %q: an unacked entry's key of %d bytes", s.key.Name, len(k))
			return false
		}
		e := unacked.Entry{Key: unacked.Key{VHost: s.key.VHost, Queue: s.key.Name, Offset: binary.BigEndian.Uint64(k[1:])}}
		if derr = codec.DecodeEntry(v, &e); derr != nil {
			derr = fmt.Errorf("qgroup: queue %q: unacked entry %d: %w", s.key.Name, e.Offset, derr)
			return false
		}
		entries[e.Offset] = e
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.data, s.next, s.cursor, s.live, s.first, s.entries = d, c.next, c.cursor, c.count, c.first, entries
	s.mu.Unlock()
	return nil
}

// Committed hands the feed what the applies since the last call changed:
// their writes are readable now.
func (s *state) Committed() {
	s.mu.Lock()
	changes, reset := s.changes, s.reset
	s.changes, s.reset = nil, false
	s.mu.Unlock()
	if reset {
		changes = append(changes, meta.Change{Kind: meta.ChangeReset})
	}
	s.feed.deliver(changes)
}

// Apply applies one committed command, writing what it changes to b. A
// command that does not decode changes nothing (every replica refuses it
// alike) and answers nil. A write that fails stops the member (the
// replica could not follow its log).
func (s *state) Apply(b *multiraft.Batch, _ uint64, cmd []byte) []byte {
	if len(cmd) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out, err := s.applyLocked(b, cmd)
	if err != nil {
		panic(fmt.Sprintf("qgroup: queue %q: write its state: %v", s.key.Name, err))
	}
	return out
}

// applyLocked is Apply; s.mu is held.
func (s *state) applyLocked(b *multiraft.Batch, cmd []byte) ([]byte, error) {
	d := decoder{b: cmd[1:]}
	switch cmd[0] {
	case opAppend:
		recs := d.records()
		if d.done() != nil {
			return nil, nil
		}
		first := s.next
		var scratch []byte
		for i := range recs {
			scratch = codec.AppendRecord(scratch[:0], &recs[i])
			if err := b.Set(offsetKey(keyRecord, s.next), scratch); err != nil {
				return nil, err
			}
			if s.live == 0 {
				s.first = s.next
			}
			s.live++
			s.next++
		}
		s.changes = append(s.changes, meta.Change{Kind: meta.ChangeAppended, Shard: s.shard, Offset: s.next})
		return binary.BigEndian.AppendUint64(nil, first), s.writeCounters(b)
	case opDelOffsets:
		offs := d.offsets()
		if d.done() != nil {
			return nil, nil
		}
		firstGone := false
		for _, o := range offs {
			if o < s.first || o >= s.next {
				continue
			}
			k := offsetKey(keyRecord, o)
			_, ok, err := b.Get(k)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			if err := b.Delete(k); err != nil {
				return nil, err
			}
			s.live--
			firstGone = firstGone || o == s.first
		}
		if firstGone {
			if err := s.advanceFirst(b); err != nil {
				return nil, err
			}
		}
		return boolResult[1], s.writeCounters(b)
	case opDelShard:
		if d.done() != nil {
			return nil, nil
		}
		if err := b.DeleteRange([]byte{keyRecord}, []byte{keyRecord + 1}); err != nil {
			return nil, err
		}
		s.next, s.live, s.first = 0, 0, 0
		return boolResult[1], s.writeCounters(b)
	case opCAS:
		old, new := d.u(), d.u()
		if d.done() != nil {
			return nil, nil
		}
		if s.cursor != old {
			return boolResult[0], nil
		}
		s.cursor = new
		s.changes = append(s.changes, meta.Change{Kind: meta.ChangeCursor, VHost: s.key.VHost, Queue: s.key.Name, Offset: new})
		return boolResult[1], s.writeCounters(b)
	case opPut:
		es := d.entries(s.entryKey())
		if d.done() != nil {
			return nil, nil
		}
		return boolResult[1], s.putEntries(b, es)
	case opDelete:
		offs := d.offsets()
		if d.done() != nil {
			return nil, nil
		}
		for _, o := range offs {
			e, ok := s.entries[o]
			if !ok {
				continue
			}
			delete(s.entries, o)
			if err := b.Delete(offsetKey(keyEntry, o)); err != nil {
				return nil, err
			}
			if e.State == unacked.Returned {
				s.changes = append(s.changes, meta.Change{Kind: meta.ChangeTaken, VHost: s.key.VHost, Queue: s.key.Name, Offset: o})
			}
		}
		return boolResult[1], nil
	case opClaim:
		move, from, to := d.u(), d.u(), d.u()
		taken := d.offsets()
		es := d.entries(s.entryKey())
		if d.done() != nil {
			return nil, nil
		}
		if move == 1 && s.cursor != from {
			return boolResult[0], nil
		}
		for _, o := range taken {
			if e, found := s.entries[o]; !found || e.State != unacked.Returned {
				return boolResult[0], nil
			}
		}
		if err := s.putEntries(b, es); err != nil {
			return nil, err
		}
		if move == 1 {
			s.cursor = to
			s.changes = append(s.changes, meta.Change{Kind: meta.ChangeCursor, VHost: s.key.VHost, Queue: s.key.Name, Offset: to})
			if err := s.writeCounters(b); err != nil {
				return nil, err
			}
		}
		return boolResult[1], nil
	case opDelQueue:
		if d.done() != nil {
			return nil, nil
		}
		clear(s.entries)
		return boolResult[1], b.DeleteRange([]byte{keyEntry}, []byte{keyEntry + 1})
	}
	return nil, nil
}

func (s *state) writeCounters(b *multiraft.Batch) error {
	return b.Set(metaKey, encodeCounters(counters{next: s.next, cursor: s.cursor, count: s.live, first: s.first}))
}

// advanceFirst moves first to the lowest live record at or after it,
// reading through b (the deletions below are tombstones it skips once,
// not at every read). s.mu is held.
func (s *state) advanceFirst(b *multiraft.Batch) error {
	if s.live == 0 {
		s.first = s.next
		return nil
	}
	found := false
	err := b.Scan(offsetKey(keyRecord, s.first), []byte{keyRecord + 1}, func(k, _ []byte) bool {
		if len(k) == 9 {
			s.first, found = binary.BigEndian.Uint64(k[1:]), true
		}
		return false
	})
	if err == nil && !found {
		err = fmt.Errorf("qgroup: queue %q counts %d live records and has none from offset %d", s.key.Name, s.live, s.first)
	}
	return err
}

func (s *state) entryKey() unacked.Key { return unacked.Key{VHost: s.key.VHost, Queue: s.key.Name} }

// putEntries writes es, telling the feed of each written Returned and
// each Returned one overwritten in state Delivered. s.mu is held.
func (s *state) putEntries(b *multiraft.Batch, es []unacked.Entry) error {
	var scratch []byte
	for _, e := range es {
		if e.State != unacked.Delivered && e.State != unacked.Returned {
			continue // the proposer checked; a forged one changes nothing
		}
		was, had := s.entries[e.Offset]
		s.entries[e.Offset] = e
		scratch = codec.AppendEntry(scratch[:0], &e)
		if err := b.Set(offsetKey(keyEntry, e.Offset), scratch); err != nil {
			return err
		}
		switch {
		case e.State == unacked.Returned:
			s.changes = append(s.changes, meta.Change{Kind: meta.ChangeReturned, VHost: s.key.VHost, Queue: s.key.Name, Offset: e.Offset, DeliveryCount: e.DeliveryCount})
		case had && was.State == unacked.Returned:
			s.changes = append(s.changes, meta.Change{Kind: meta.ChangeTaken, VHost: s.key.VHost, Queue: s.key.Name, Offset: e.Offset})
		}
	}
	return nil
}

// read returns up to max live records from offset from, from disk. An
// error is the disk's, or a record that no longer decodes.
func (s *state) read(from uint64, max int) ([]storage.Record, error) {
	out := []storage.Record{}
	s.mu.RLock()
	d, first, next := s.data, s.first, s.next
	s.mu.RUnlock()
	if d == nil || max < 1 || from >= next {
		return out, nil
	}
	from = max2(from, first) // nothing live below first: skip its tombstones
	var derr error
	err := d.Scan(offsetKey(keyRecord, from), []byte{keyRecord + 1}, func(k, v []byte) bool {
		if len(k) != 9 {
			derr = fmt.Errorf("qgroup: queue %q: a record's key of %d bytes", s.key.Name, len(k))
			return false
		}
		r, err := codec.DecodeRecord(v)
		if err != nil {
			derr = fmt.Errorf("qgroup: queue %q: record %d: %w", s.key.Name, binary.BigEndian.Uint64(k[1:]), err)
			return false
		}
		r.Offset = binary.BigEndian.Uint64(k[1:])
		out = append(out, r)
		return len(out) < max
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

func max2(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

func (s *state) firstOffset() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.live == 0 {
		return s.next
	}
	return s.first
}

func (s *state) count() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.live
}

func (s *state) offset() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cursor
}

func (s *state) entry(off uint64) (unacked.Entry, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.entries[off]
	return e, ok
}

// entriesSorted copies the unacked entries in offset order, so that the
// caller's callback runs without the lock (it may write to the group).
func (s *state) entriesSorted() []unacked.Entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sortedLocked()
}

// sortedLocked is the entries in offset order; s.mu is held.
func (s *state) sortedLocked() []unacked.Entry {
	out := slices.Collect(maps.Values(s.entries))
	slices.SortFunc(out, func(a, b unacked.Entry) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// snapshotVersion leads every snapshot of a queue's state: what a
// replica that lags restores, and the checkpoints of format 1 (the whole
// state in memory) that a restart converts.
const snapshotVersion = 1

// Snapshot writes the whole state to w, read from disk one record at a
// time: next offset, cursor, the live records (offset, encoding), the
// unacked entries. The applier calls it, so no apply runs meanwhile.
func (s *state) Snapshot(w io.Writer) error {
	s.mu.RLock()
	d, next, cursor, live, entries := s.data, s.next, s.cursor, s.live, s.sortedLocked()
	s.mu.RUnlock()
	bw := bufio.NewWriterSize(w, 64<<10)
	e := encoder{b: []byte{snapshotVersion}}
	e.u(next)
	e.u(cursor)
	e.u(live)
	var n uint64
	if d != nil {
		err := d.Scan([]byte{keyRecord}, []byte{keyRecord + 1}, func(k, v []byte) bool {
			if len(k) != 9 {
				return true
			}
			e.u(binary.BigEndian.Uint64(k[1:]))
			e.bs(v)
			n++
			if len(e.b) >= 32<<10 {
				_, _ = bw.Write(e.b)
				e.b = e.b[:0]
			}
			return true
		})
		if err != nil {
			return fmt.Errorf("qgroup: queue %q: snapshot: %w", s.key.Name, err)
		}
	}
	if n != live {
		return fmt.Errorf("qgroup: queue %q: snapshot: %d records on disk where %d are counted", s.key.Name, n, live)
	}
	e.entries(entries)
	if _, err := bw.Write(e.b); err != nil {
		return err
	}
	return bw.Flush()
}

// decodeSnapshot reads a snapshot (Snapshot's, or a format 1
// checkpoint's), calling rec with each record's offset and encoding in
// order, and returns its counters and unacked entries. Offsets must
// ascend and stay below the next offset, so what it accepts restores to
// a consistent state.
func decodeSnapshot(b []byte, k unacked.Key, rec func(off uint64, v []byte) error) (next, cursor uint64, entries []unacked.Entry, err error) {
	if len(b) == 0 || b[0] != snapshotVersion {
		return 0, 0, nil, errors.New("unknown snapshot version")
	}
	d := decoder{b: b[1:]}
	next, cursor = d.u(), d.u()
	n := d.count(2)
	var last uint64
	for i := range n {
		o := d.u()
		v := d.bs()
		if d.err != nil {
			break
		}
		if o >= next || i > 0 && o <= last {
			return 0, 0, nil, fmt.Errorf("record offset %d out of order (next %d)", o, next)
		}
		last = o
		if _, err := codec.DecodeRecord(v); err != nil {
			return 0, 0, nil, err
		}
		if err := rec(o, v); err != nil {
			return 0, 0, nil, err
		}
	}
	entries = d.entries(k)
	if err := d.done(); err != nil {
		return 0, 0, nil, err
	}
	return next, cursor, entries, nil
}

// Restore writes a snapshot's state (empty: the empty state) to b, whose
// group data the engine deleted; once committed the engine loads it, and
// the feed hears a reset at Committed.
func (s *state) Restore(b *multiraft.Batch, snap []byte) error {
	var c counters
	var entries []unacked.Entry
	if len(snap) > 0 {
		var err error
		first := true
		c.next, c.cursor, entries, err = decodeSnapshot(snap, s.entryKey(), func(o uint64, v []byte) error {
			if first {
				c.first, first = o, false
			}
			c.count++
			return b.Set(offsetKey(keyRecord, o), v)
		})
		if err != nil {
			return fmt.Errorf("qgroup: queue %q: snapshot: %w", s.key.Name, err)
		}
		if first {
			c.first = c.next
		}
	}
	if err := b.Set(metaKey, encodeCounters(c)); err != nil {
		return err
	}
	var scratch []byte
	for i := range entries {
		scratch = codec.AppendEntry(scratch[:0], &entries[i])
		if err := b.Set(offsetKey(keyEntry, entries[i].Offset), scratch); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.changes, s.reset = nil, true
	s.mu.Unlock()
	return nil
}

// feed is the queue groups' half of the change feed (meta.ChangeFeed):
// every change a group applies on this member, from its applier.
type feed struct {
	mu   sync.Mutex
	list []*watcher
}

type watcher struct {
	mu        sync.Mutex
	fn        func(meta.Change)
	cancelled bool
}

func (f *feed) deliver(cs []meta.Change) {
	if len(cs) == 0 {
		return
	}
	f.mu.Lock()
	ws := f.list
	f.mu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		for _, c := range cs {
			if w.cancelled {
				break
			}
			w.fn(c)
		}
		w.mu.Unlock()
	}
}

// watch adds fn; cancel removes it and returns once fn is not running.
func (f *feed) watch(fn func(meta.Change)) (cancel func()) {
	w := &watcher{fn: fn}
	f.mu.Lock()
	f.list = append(slices.Clip(f.list), w)
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.list = slices.DeleteFunc(slices.Clone(f.list), func(x *watcher) bool { return x == w })
			f.mu.Unlock()
			w.mu.Lock()
			w.cancelled = true
			w.mu.Unlock()
		})
	}
}
