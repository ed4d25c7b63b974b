package raft

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

var _ meta.ChangeFeed = (*Node)(nil)

// watcher is one Watch registration.
type watcher struct {
	fn func(meta.Change)
	// callMu is held while fn runs, so that cancel can wait for a call in
	// progress; cancelled is checked under it before every call.
	callMu    sync.Mutex
	cancelled atomic.Bool
}

// Watch calls fn with every change applied to this node's replica from the
// next applied batch on, in apply order, from the Ready loop: on every
// node, followers included. A batch's changes are delivered once the batch
// is committed to the state DB and before any write it resolves returns
// or any read waiting for it is released, so a caller whose write returned
// has had its own changes delivered. If a batch is
// being applied when Watch is called, Watch waits until it is committed:
// everything fn will not be told about is already in the state.
//
// fn must not block and must not call the node or any cancel func: it
// stalls the whole node, and a read (or a cancel) would wait for itself.
//
// cancel stops the calls and is idempotent: it returns once fn is not
// running, and fn is never called again.
func (n *Node) Watch(fn func(meta.Change)) (cancel func()) {
	w := &watcher{fn: fn}
	n.watch.Lock()
	// Copy on write: the Ready loop delivers to the slice it took.
	n.watch.list = append(slices.Clip(n.watch.list), w)
	n.watch.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.cancelled.Store(true)
			n.watch.Lock()
			n.watch.list = slices.DeleteFunc(slices.Clone(n.watch.list), func(x *watcher) bool { return x == w })
			n.watch.Unlock()
		})
		// Taking callMu waits for a call in progress; any later call
		// sees cancelled.
		w.callMu.Lock()
		w.callMu.Unlock()
	}
}

// deliver hands cs to every watcher of ws that is not cancelled.
func deliver(ws []*watcher, cs []meta.Change) {
	if len(cs) == 0 {
		return
	}
	for _, w := range ws {
		w.deliver(cs)
	}
}

func (w *watcher) deliver(cs []meta.Change) {
	w.callMu.Lock()
	defer w.callMu.Unlock()
	for _, c := range cs {
		if w.cancelled.Load() {
			return
		}
		w.fn(c)
	}
}

// changeSet gathers the changes of one applied batch. A nil *changeSet
// (nobody watches) records nothing and reads nothing, so its methods are
// safe to call on nil.
type changeSet struct {
	out []meta.Change
	// topology holds the vhosts whose ChangeTopology is in out: one per
	// vhost per batch.
	topology map[string]struct{}
	// tails indexes a shard's ChangeAppended in out: one per shard per
	// batch, at the first append's position with the last append's tail,
	// so a watcher never sees a cursor move past the tail it knows.
	tails map[string]int
}

func newChangeSet() *changeSet { return &changeSet{} }

func (cs *changeSet) changes() []meta.Change {
	if cs == nil {
		return nil
	}
	return cs.out
}

func (cs *changeSet) topologyOf(vhost string) {
	if _, ok := cs.topology[vhost]; ok {
		return
	}
	if cs.topology == nil {
		cs.topology = map[string]struct{}{}
	}
	cs.topology[vhost] = struct{}{}
	cs.out = append(cs.out, meta.Change{Kind: meta.ChangeTopology, VHost: vhost})
}

// appended records that shard's next offset is now tail.
func (cs *changeSet) appended(shard []byte, tail uint64) {
	if cs == nil {
		return
	}
	if i, ok := cs.tails[string(shard)]; ok {
		cs.out[i].Offset = tail
		return
	}
	if cs.tails == nil {
		cs.tails = map[string]int{}
	}
	cs.tails[string(shard)] = len(cs.out)
	cs.out = append(cs.out, meta.Change{Kind: meta.ChangeAppended, Shard: string(shard), Offset: tail})
}

// cursorMoved records a write of offset to the counter under key k, a
// ChangeCursor when k is a queue cursor's key.
func (cs *changeSet) cursorMoved(k []byte, offset uint64) {
	if cs == nil {
		return
	}
	if vhost, queue, ok := parseCursorKey(k); ok {
		cs.out = append(cs.out, meta.Change{Kind: meta.ChangeCursor, VHost: vhost, Queue: queue, Offset: offset})
	}
}

// keyWritten records the change that setting k to v (or deleting k, when
// del) makes. It must be called before the write: taking a Returned entry
// is told by the entry it replaces, read through the batch.
func (cs *changeSet) keyWritten(b pebble.Reader, k, v []byte, del bool) error {
	if cs == nil || len(k) < 2 {
		return nil
	}
	switch k[0] {
	case metakey.Prefix:
		switch k[1] {
		case metakey.KindVHost, metakey.KindLimit:
			// A vhost's limits are part of what a follower reloads
			// with the vhost list.
			cs.topologyOf("")
		case metakey.KindExch, metakey.KindQueue, metakey.KindBinding:
			d := decoder{b: k[2:]}
			if vhost := d.lp("key vhost"); d.err == nil {
				cs.topologyOf(string(vhost))
			}
		case metakey.KindPolicy, metakey.KindOpPolicy:
			d := decoder{b: k[2:]}
			if vhost := d.lp("key vhost"); d.err == nil {
				cs.out = append(cs.out, meta.Change{Kind: meta.ChangePolicy, VHost: string(vhost)})
			}
		case metakey.KindParam:
			d := decoder{b: k[2:]}
			component := d.lp("key component")
			vhost := d.lp("key vhost")
			if d.err == nil {
				cs.out = append(cs.out, meta.Change{Kind: meta.ChangeParameter, Component: string(component), VHost: string(vhost), Name: string(d.b)})
			}
		case metakey.KindGlobal:
			cs.out = append(cs.out, meta.Change{Kind: meta.ChangeParameter, Name: string(k[2:])})
		}
	case recordPrefix:
		if !del {
			cs.out = append(cs.out, meta.Change{Kind: meta.ChangeRecord, Shard: string(k[1:])})
		}
	case 'u':
		if !del && codec.EntryState(v) == unacked.Returned {
			key, kerr := parseUnackedKey(k)
			e, verr := readEntry(key, v)
			if kerr == nil && verr == nil {
				cs.out = append(cs.out, meta.Change{Kind: meta.ChangeReturned, VHost: key.VHost, Queue: key.Queue,
					Offset: key.Offset, DeliveryCount: e.DeliveryCount})
			}
			return nil
		}
		was, err := isReturned(b, k)
		if err != nil || !was {
			return err
		}
		if key, err := parseUnackedKey(k); err == nil {
			cs.out = append(cs.out, meta.Change{Kind: meta.ChangeTaken, VHost: key.VHost, Queue: key.Queue, Offset: key.Offset})
		}
	}
	return nil
}

// parseCursorKey is metakey.Cursor's inverse.
func parseCursorKey(k []byte) (vhost, queue string, ok bool) {
	if len(k) < 2 || k[0] != metakey.Prefix || k[1] != metakey.KindCursor {
		return "", "", false
	}
	d := decoder{b: k[2:]}
	v := d.lp("cursor vhost")
	if d.err != nil {
		return "", "", false
	}
	return string(v), string(d.b), true
}
