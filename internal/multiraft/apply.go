package multiraft

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// applyState is one group's state machine and how far it applied. After
// New only its applier touches it.
type applyState struct {
	group     uint64
	sm        StateMachine
	data      *Data
	applied   uint64
	snapIndex uint64
	// conf is the configuration as of applied; sinceSnap the entry bytes
	// applied since the last checkpoint.
	conf      *raftpb.ConfState
	sinceSnap uint64
	removed   bool
	// term is the highest term of the entries applied: when it grows, this
	// member's proposals of earlier terms not applied yet were lost.
	term uint64
	// dedup is the group's proposers' next sequences, as of applied;
	// mine the next of this member's incarnation, read by the loop.
	dedup dedupTable
	mine  atomic.Uint64
}

// applyItem is one hand-off from the loop to a group's applier: committed
// entries (with the configuration as of the last), a snapshot received
// from the leader to restore, a snapshot message to build and send to a
// replica, or the group's removal.
type applyItem struct {
	st        *applyState
	ents      []*raftpb.Entry
	conf      *raftpb.ConfState
	forceSnap bool
	restore   *raftpb.Snapshot
	send      *raftpb.Message
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
		// The loop deleted the group's keys; a hand-off applied since may
		// have written some again.
		if err := a.e.store.dropData(st.group); err != nil {
			a.e.fatal(err)
		}
		return
	case st.removed:
		if it.send != nil {
			a.e.snapshotFailed(it.send.GetTo(), st.group)
		}
		return
	case it.send != nil:
		a.sendSnapshot(st, it.send)
		return
	case it.restore != nil:
		idx := it.restore.GetMetadata().GetIndex()
		if idx <= st.applied {
			return
		}
		if err := a.e.restoreData(st, it.restore, false); err != nil {
			a.e.fatal(fmt.Errorf("group %d: restore a snapshot: %w", st.group, err))
		}
		if err := st.sm.Load(st.data); err != nil {
			a.e.fatal(fmt.Errorf("group %d: load a restored snapshot: %w", st.group, err))
		}
		st.sm.Committed()
		md := it.restore.GetMetadata()
		st.applied, st.snapIndex, st.term, st.sinceSnap = idx, idx, md.GetTerm(), 0
		st.conf = proto.Clone(raftpb.EnsureConfState(md.GetConfState())).(*raftpb.ConfState)
		a.e.restores.Add(1)
		// The state is on disk: the stored snapshot need not keep it.
		id := st.group
		select {
		case a.e.ops <- func() { a.e.markRestored(id, idx) }:
		default: // the next checkpoint replaces it
		}
		return
	}
	var b *Batch
	type answer struct {
		seq uint64
		out []byte
	}
	var answers []answer
	var newTerm uint64
	dedupChanged, resend := false, false
	for _, ent := range it.ents {
		if ent.GetIndex() <= st.applied {
			continue // covered by a snapshot restored meanwhile, or by the applied record at restart
		}
		if t := ent.GetTerm(); t > st.term {
			// Answer what this entry answers first: it may be one of
			// the proposals of an earlier term on this member.
			newTerm = t
			st.term = t
		}
		if b == nil {
			b = a.e.store.newDataBatch(st.group)
		}
		switch ent.GetType() {
		case raftpb.EntryNormal:
			if id, seq, cmd, ok := parseEntry(ent.GetData()); ok {
				dedupChanged = dedupChanged || id.gseq != 0
				switch st.dedup.admit(id) {
				case applyIt:
					out := st.sm.Apply(b, ent.GetIndex(), cmd)
					a.e.applied.Add(1)
					if id.proposer == a.e.cfg.ID {
						answers = append(answers, answer{seq, out})
					}
				case ahead:
					// An earlier one of its proposer was lost: it
					// proposes again, in order, what is not applied.
					resend = resend || id.proposer == a.e.cfg.ID && id.inc == a.e.inc
				case copyOf:
				}
			}
		case raftpb.EntryConfChange:
			cc := &raftpb.ConfChange{}
			if proto.Unmarshal(ent.GetData(), cc) == nil {
				if proposer, seq, _, ok := parseEnvelope(cc.GetContext()); ok && proposer == a.e.cfg.ID {
					answers = append(answers, answer{seq, nil})
				}
			}
		}
		st.applied = ent.GetIndex()
		st.sinceSnap += uint64(len(ent.GetData()))
	}
	if b == nil {
		return // nothing new
	}
	if it.conf != nil {
		st.conf = it.conf // the configuration as of the hand-off's last entry, now applied
	}
	// The state writes, then what may read them: the state machine's
	// readers, then the proposers.
	if dedupChanged {
		if err := b.b.Set(dedupKey(st.group), encodeDedup(st.dedup), nil); err != nil {
			a.e.fatal(err)
		}
	}
	if err := a.e.store.commitData(b, st.group, appliedRecord{index: st.applied, term: st.term, conf: st.conf}); err != nil {
		a.e.fatal(err)
	}
	st.mine.Store(st.dedup.next(a.e.cfg.ID, a.e.inc))
	st.sm.Committed()
	for _, an := range answers {
		a.e.answer(an.seq, result{value: an.out})
	}
	if newTerm != 0 {
		a.e.failOlder(st.group, newTerm)
	}
	if resend {
		a.e.requestResend(st.group, false)
	}
	a.maybeSnapshot(st, it.forceSnap)
}

// sendSnapshot builds the snapshot raft asked to send in m from the
// state machine's data as of the last applied index (not the checkpoint
// raft names, whose state is no longer kept apart) and hands it to the
// transport. A replica that restores it answers with that later index,
// which the leader's log holds.
func (a *applier) sendSnapshot(st *applyState, m *raftpb.Message) {
	to, id := m.GetTo(), st.group
	var buf bytes.Buffer
	if err := st.sm.Snapshot(&buf); err != nil {
		a.e.cfg.Logger.Warn("multiraft: build a snapshot to send", "group", id, "to", to, "err", err)
		a.e.snapshotFailed(to, id)
		return
	}
	out := &raftpb.Message{
		Type: m.Type, To: m.To, From: m.From, Term: m.Term,
		Snapshot: &raftpb.Snapshot{Data: wrapSnapshot(st.dedup, buf.Bytes()), Metadata: &raftpb.SnapshotMetadata{
			Index: proto.Uint64(st.applied), Term: proto.Uint64(st.term), ConfState: proto.Clone(st.conf).(*raftpb.ConfState),
		}},
	}
	sent := func(ok bool) {
		select {
		case a.e.ops <- func() { a.e.snapshotSent(to, id, ok) }:
		case <-a.e.stop:
		}
	}
	if !a.e.tr.send(to, &frame{msgs: []groupMsg{{group: id, msg: out}}}, sent) {
		a.e.snapshotFailed(to, id)
	}
}

// maybeSnapshot checkpoints st every SnapshotEntries applied entries or
// SnapshotBytes of them (at once after a member was added), at most one
// checkpoint per SnapshotInterval on this member, and hands it to the
// loop, which drops the log before it. A checkpoint copies nothing: the
// state is on disk up to st.applied, committed before (checkpointData).
func (a *applier) maybeSnapshot(st *applyState, force bool) {
	due := st.applied-st.snapIndex >= a.e.cfg.SnapshotEntries || st.sinceSnap >= a.e.cfg.SnapshotBytes
	if st.applied <= st.snapIndex || !force && !due {
		return
	}
	if !force && !a.e.snapGate.allow() {
		return
	}
	id, index, prev, conf := st.group, st.applied, st.snapIndex, proto.Clone(st.conf).(*raftpb.ConfState)
	st.snapIndex = index
	select {
	case a.e.ops <- func() { a.e.installSnapshot(id, index, conf, checkpointData) }:
		st.sinceSnap = 0
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
