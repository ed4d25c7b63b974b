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
// mutex so that the loop never blocks on it.
type applier struct {
	e      *Engine
	mu     sync.Mutex
	queue  []applyItem
	signal chan struct{}
}

func newApplier(e *Engine) *applier {
	return &applier{e: e, signal: make(chan struct{}, 1)}
}

func (a *applier) enqueue(it applyItem) {
	a.mu.Lock()
	a.queue = append(a.queue, it)
	a.mu.Unlock()
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
		a.mu.Unlock()
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
	id, index := st.group, st.applied
	st.snapIndex = index
	select {
	case a.e.ops <- func() { a.e.installSnapshot(id, index, conf, data) }:
	case <-a.e.stop:
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
