package qgroup

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/codec"
)

// state is one queue's replicated state on this member, its group's
// multiraft.StateMachine: the queue's records, the next offset, its
// cursor and its unacked index. The group's applier writes it; the
// queue's actor and the management API read it.
type state struct {
	key   meta.QueueKey
	shard string
	feed  *feed

	mu      sync.RWMutex
	recs    map[uint64]storage.Record
	order   []uint64 // offsets appended, ascending; deleted ones linger until compact
	next    uint64
	cursor  uint64
	entries map[uint64]unacked.Entry
	bytes   int64 // Properties and Body of the live records
}

func newState(key meta.QueueKey, f *feed) *state {
	return &state{key: key, shard: ShardName(key), feed: f, recs: map[uint64]storage.Record{}, entries: map[uint64]unacked.Entry{}}
}

// ShardName is the shard the broker gives queue k (its vhost and name,
// NUL-separated).
func ShardName(k meta.QueueKey) string { return k.VHost + "\x00" + k.Name }

var boolResult = [2][]byte{{0}, {1}}

// Apply applies one committed command. A command that does not decode
// changes nothing (every replica refuses it alike) and answers nil.
func (s *state) Apply(_ uint64, cmd []byte) []byte {
	if len(cmd) == 0 {
		return nil
	}
	d := decoder{b: cmd[1:]}
	var changes []meta.Change
	var out []byte
	s.mu.Lock()
	switch cmd[0] {
	case opAppend:
		recs := d.records()
		if d.done() != nil {
			break
		}
		first := s.next
		for i := range recs {
			recs[i].Offset = s.next
			s.recs[s.next] = recs[i]
			s.order = append(s.order, s.next)
			s.bytes += int64(len(recs[i].Properties) + len(recs[i].Body))
			s.next++
		}
		out = binary.BigEndian.AppendUint64(nil, first)
		changes = append(changes, meta.Change{Kind: meta.ChangeAppended, Shard: s.shard, Offset: s.next})
	case opDelOffsets:
		offs := d.offsets()
		if d.done() != nil {
			break
		}
		for _, o := range offs {
			if r, ok := s.recs[o]; ok {
				s.bytes -= int64(len(r.Properties) + len(r.Body))
				delete(s.recs, o)
			}
		}
		s.compact()
		out = boolResult[1]
	case opDelShard:
		if d.done() != nil {
			break
		}
		clear(s.recs)
		s.order, s.next, s.bytes = nil, 0, 0
		out = boolResult[1]
	case opCAS:
		old, new := d.u(), d.u()
		if d.done() != nil {
			break
		}
		if s.cursor != old {
			out = boolResult[0]
			break
		}
		s.cursor = new
		out = boolResult[1]
		changes = append(changes, meta.Change{Kind: meta.ChangeCursor, VHost: s.key.VHost, Queue: s.key.Name, Offset: new})
	case opPut:
		es := d.entries(s.entryKey())
		if d.done() != nil {
			break
		}
		changes = s.putEntries(es, changes)
		out = boolResult[1]
	case opDelete:
		offs := d.offsets()
		if d.done() != nil {
			break
		}
		for _, o := range offs {
			if e, ok := s.entries[o]; ok {
				delete(s.entries, o)
				if e.State == unacked.Returned {
					changes = append(changes, meta.Change{Kind: meta.ChangeTaken, VHost: s.key.VHost, Queue: s.key.Name, Offset: o})
				}
			}
		}
		out = boolResult[1]
	case opClaim:
		move, from, to := d.u(), d.u(), d.u()
		taken := d.offsets()
		es := d.entries(s.entryKey())
		if d.done() != nil {
			break
		}
		out = boolResult[0]
		if move == 1 && s.cursor != from {
			break
		}
		ok := true
		for _, o := range taken {
			if e, found := s.entries[o]; !found || e.State != unacked.Returned {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		changes = s.putEntries(es, changes)
		if move == 1 {
			s.cursor = to
			changes = append(changes, meta.Change{Kind: meta.ChangeCursor, VHost: s.key.VHost, Queue: s.key.Name, Offset: to})
		}
		out = boolResult[1]
	case opDelQueue:
		if d.done() != nil {
			break
		}
		clear(s.entries)
		out = boolResult[1]
	}
	s.mu.Unlock()
	s.feed.deliver(changes)
	return out
}

func (s *state) entryKey() unacked.Key { return unacked.Key{VHost: s.key.VHost, Queue: s.key.Name} }

// putEntries writes es, telling the feed of each written Returned and
// each Returned one overwritten in state Delivered. s.mu is held.
func (s *state) putEntries(es []unacked.Entry, changes []meta.Change) []meta.Change {
	for _, e := range es {
		if e.State != unacked.Delivered && e.State != unacked.Returned {
			continue // the proposer checked; a forged one changes nothing
		}
		was, had := s.entries[e.Offset]
		s.entries[e.Offset] = e
		switch {
		case e.State == unacked.Returned:
			changes = append(changes, meta.Change{Kind: meta.ChangeReturned, VHost: s.key.VHost, Queue: s.key.Name, Offset: e.Offset, DeliveryCount: e.DeliveryCount})
		case had && was.State == unacked.Returned:
			changes = append(changes, meta.Change{Kind: meta.ChangeTaken, VHost: s.key.VHost, Queue: s.key.Name, Offset: e.Offset})
		}
	}
	return changes
}

// compact drops deleted offsets from order once they are most of it.
func (s *state) compact() {
	if len(s.order) < 64 || len(s.order) < 2*len(s.recs) {
		return
	}
	live := s.order[:0]
	for _, o := range s.order {
		if _, ok := s.recs[o]; ok {
			live = append(live, o)
		}
	}
	s.order = slices.Clip(live)
}

// read returns up to max live records from offset from.
func (s *state) read(from uint64, max int) []storage.Record {
	out := []storage.Record{}
	s.mu.RLock()
	defer s.mu.RUnlock()
	i := sort.Search(len(s.order), func(i int) bool { return s.order[i] >= from })
	for ; i < len(s.order) && len(out) < max; i++ {
		if r, ok := s.recs[s.order[i]]; ok {
			out = append(out, r)
		}
	}
	return out
}

func (s *state) firstOffset() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, o := range s.order {
		if _, ok := s.recs[o]; ok {
			return o
		}
	}
	return s.next
}

func (s *state) count() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return uint64(len(s.recs))
}

func (s *state) memoryBytes() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.bytes
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

// snapshotVersion leads every checkpoint of a queue's state.
const snapshotVersion = 1

// Snapshot encodes the whole state: next offset, cursor, the live
// records and the unacked entries.
func (s *state) Snapshot() ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := encoder{b: []byte{snapshotVersion}}
	e.u(s.next)
	e.u(s.cursor)
	e.u(uint64(len(s.recs)))
	var scratch []byte
	for _, o := range s.order {
		r, ok := s.recs[o]
		if !ok {
			continue
		}
		e.u(o)
		scratch = codec.AppendRecord(scratch[:0], &r)
		e.bs(scratch)
	}
	e.entries(s.sortedLocked())
	return e.b, nil
}

// Restore replaces the state with a checkpoint's (empty: the empty
// state) and tells the feed that anything may have changed.
func (s *state) Restore(b []byte) error {
	recs := map[uint64]storage.Record{}
	var order []uint64
	var next, cursor uint64
	var bytes int64
	entries := map[uint64]unacked.Entry{}
	if len(b) > 0 {
		if b[0] != snapshotVersion {
			return fmt.Errorf("qgroup: queue %q: unknown checkpoint version %d", s.key.Name, b[0])
		}
		d := decoder{b: b[1:]}
		next, cursor = d.u(), d.u()
		n := d.count(2)
		for range n {
			o := d.u()
			v := d.bs()
			if d.err != nil {
				break
			}
			r, err := codec.DecodeRecord(v)
			if err != nil {
				return fmt.Errorf("qgroup: queue %q: checkpoint: %w", s.key.Name, err)
			}
			r.Offset = o
			recs[o] = r
			order = append(order, o)
			bytes += int64(len(r.Properties) + len(r.Body))
		}
		for _, e := range d.entries(s.entryKey()) {
			entries[e.Offset] = e
		}
		if err := d.done(); err != nil {
			return fmt.Errorf("qgroup: queue %q: checkpoint: %w", s.key.Name, err)
		}
	}
	s.mu.Lock()
	s.recs, s.order, s.next, s.cursor, s.entries, s.bytes = recs, order, next, cursor, entries, bytes
	s.mu.Unlock()
	s.feed.deliver([]meta.Change{{Kind: meta.ChangeReset}})
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
