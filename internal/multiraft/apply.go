package multiraft

import (
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// applyState is one group's state machine and how far it applied. After
// New only its applier touches it.
type applyState struct {
	group     uint64
	sm        StateMachine
	applied   uint64
	snapIndex uint64
	removed   bool
	// term is the highest term of the entries applied: when it grows, this
	// member's proposals of earlier terms not applied yet were lost.
	term uint64
}

// applyItem is one hand-off from the loop to a group's applier: committed
// entries (with the configuration as of the last), a snapshot received
// from the leader to restore, or the group's removal.
type applyItem struct {
	st        *applyState
	ents      []*raftpb.Entry
	conf      *raftpb.ConfState
	forceSnap bool
	restore   *raftpb.Snapshot
	removed   bool
}

// applier runs the state machines of the groups assigned to it, off the
// raft loop, in each group's log order. Its queue is a slice under a
// mutex holding at most Config.MaxApplyBytes of entries: past it the loop
// waits (enqueue) until the applier took what was queued.
type applier struct {
	e      *Engine
	mu     sync.Mutex
	queue  []applyItem
	bytes  int // entry bytes in queue
	signal chan struct{}
	taken  chan struct{} // signalled when run takes the queue
}

func newApplier(e *Engine) *applier {
	return &applier{e: e, signal: make(chan struct{}, 1), taken: make(chan struct{}, 1)}
}

func itemBytes(it *applyItem) int {
	n := 0
	for _, ent := range it.ents {
		n += len(ent.GetData())
	}
	return n
}

// enqueue queues it for the applier. While the queue holds
// MaxApplyBytes or more it waits for the applier to take it (or for the
// engine to stop), so what waits to apply stays bounded.
func (a *applier) enqueue(it applyItem) {
	n := itemBytes(&it)
	for {
		a.mu.Lock()
		if a.bytes == 0 || a.bytes+n <= a.e.cfg.MaxApplyBytes {
			a.queue = append(a.queue, it)
			a.bytes += n
			a.mu.Unlock()
			break
		}
		a.mu.Unlock()
		select {
		case <-a.taken:
		case <-a.e.stop:
			return
		}
	}
	select {
	case a.signal <- struct{}{}:
	default:
	}
}

func (a *applier) run() {
	var batch []applyItem
	for {
		select {
		case <-a.e.stop:
			return
		case <-a.signal:
		}
		a.mu.Lock()
		batch, a.queue = a.queue, batch[:0]
		a.bytes = 0
		a.mu.Unlock()
		select {
		case a.taken <- struct{}{}:
		default:
		}
		for i := range batch {
			a.apply(&batch[i])
			batch[i] = applyItem{}
		}
	}
}

func (a *applier) apply(it *applyItem) {
	st := it.st
	switch {
	case it.removed:
		st.removed = true
		return
	case st.removed:
		return
	case it.restore != nil:
		idx := it.restore.GetMetadata().GetIndex()
		if idx <= st.applied {
			return
		}
		if err := st.sm.Restore(it.restore.GetData()); err != nil {
			a.e.fatal(err)
		}
		st.applied, st.snapIndex = idx, idx
		return
	}
	for _, ent := range it.ents {
		if ent.GetIndex() <= st.applied {
			continue // covered by a snapshot restored meanwhile
		}
		if t := ent.GetTerm(); t > st.term {
			// Answer what this entry answers first: it may be one of
			// the proposals of an earlier term on this member.
			defer a.e.failOlder(st.group, t)
			st.term = t
		}
		switch ent.GetType() {
		case raftpb.EntryNormal:
			if proposer, seq, cmd, ok := parseEnvelope(ent.GetData()); ok && len(ent.GetData()) > 0 {
				out := st.sm.Apply(ent.GetIndex(), cmd)
				if proposer == a.e.cfg.ID {
					a.e.answer(seq, result{value: out})
				}
			}
		case raftpb.EntryConfChange:
			cc := &raftpb.ConfChange{}
			if proto.Unmarshal(ent.GetData(), cc) == nil {
				if proposer, seq, _, ok := parseEnvelope(cc.GetContext()); ok && proposer == a.e.cfg.ID {
					a.e.answer(seq, result{})
				}
			}
		}
		st.applied = ent.GetIndex()
	}
	a.maybeSnapshot(st, it.conf, it.forceSnap)
}

// maybeSnapshot checkpoints st's state machine every SnapshotEntries
// applied entries (at once after a member was added, whose catching up
// needs a snapshot naming it), at most one checkpoint per
// SnapshotInterval on this member, and hands it to the loop, which drops
// the log before it.
func (a *applier) maybeSnapshot(st *applyState, conf *raftpb.ConfState, force bool) {
	if st.applied <= st.snapIndex || !force && st.applied-st.snapIndex < a.e.cfg.SnapshotEntries {
		return
	}
	if !force && !a.e.snapGate.allow() {
		return
	}
	data, err := st.sm.Snapshot()
	if err != nil {
		a.e.cfg.Logger.Warn("multiraft: snapshot failed", "group", st.group, "err", err)
		return
	}
	id, index, prev := st.group, st.applied, st.snapIndex
	st.snapIndex = index
	select {
	case a.e.ops <- func() { a.e.installSnapshot(id, index, conf, data) }:
	default:
		// The loop is busy (it may be waiting for this applier): take the
		// checkpoint again after the next entries rather than block.
		st.snapIndex = prev
	}
}

// snapGate lets one checkpoint through per interval, over all groups.
type snapGate struct {
	mu    sync.Mutex
	every time.Duration
	last  time.Time
}

func (s *snapGate) allow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.last) < s.every {
		return false
	}
	s.last = now
	return true
}
