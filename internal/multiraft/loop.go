package multiraft

import (
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// drainMax is how many more inputs loop takes after the one it woke for
// before a ready cycle: the inputs of many groups, one fsync.
const drainMax = 512

// loop is the engine's one goroutine over every group: it takes inputs
// (ticks, peers' frames, operations), then runs a ready cycle over the
// groups they touched.
func (e *Engine) loop() {
	defer close(e.done)
	ticker := time.NewTicker(e.cfg.TickInterval)
	defer ticker.Stop()
	in := e.tr.receive()
	for {
		select {
		case <-e.stop:
			return
		case <-ticker.C:
			e.tick()
		case m := <-in:
			e.receive(m)
		case op := <-e.ops:
			op()
		}
	drain:
		for range drainMax {
			select {
			case m := <-in:
				e.receive(m)
			case op := <-e.ops:
				op()
			default:
				break drain
			}
		}
		e.takeResends()
		e.readyCycle()
		e.nActive.Store(int64(len(e.active)))
	}
}

// tick advances raft's clock of the groups that are not quiesced (letting
// leaders with nothing in flight quiesce instead), sends every peer a
// liveness ping each heartbeat, and wakes the quiesced groups a peer's
// silence or return concerns.
func (e *Engine) tick() {
	e.ticks++
	now := time.Now()
	span := e.cfg.TickInterval * time.Duration(e.cfg.ElectionTicks)
	for _, id := range e.tr.members() {
		if e.ticks%e.cfg.HeartbeatTicks == 0 && e.out[id] == nil {
			e.out[id] = &frame{} // a ping, unless the cycle sends more
		}
		if _, ok := e.heard[id]; !ok {
			e.heard[id], e.alive[id] = now, true
		}
	}
	// Every member ever heard of, even one the transport no longer
	// lists: its silence is what wakes the groups it led.
	for id, last := range e.heard {
		alive := now.Sub(last) < span
		switch was := e.alive[id]; {
		case was && !alive:
			e.peerLost(id)
		case !was && alive:
			e.peerBack(id)
		}
		e.alive[id] = alive
	}
	if len(e.staging.groups) > 0 {
		e.staging.expire(now)
	}
	for id, g := range e.active {
		if len(g.parked) > 0 {
			e.unpark(g)
		}
		if e.maybeQuiesce(g) {
			continue
		}
		g.rn.Tick()
		e.dirty[id] = g
	}
}

// peerLost wakes every quiesced group led by peer, which stopped
// answering: each forgets its leader (a quiesced follower never let its
// lease run out) and the lowest surviving voter campaigns at once, so the
// group elects about an election timeout after its leader went silent.
func (e *Engine) peerLost(peer uint64) {
	for _, g := range e.groups {
		if !g.quiesced || g.lead != peer {
			continue
		}
		e.wake(g)
		_ = g.rn.ForgetLeader()
		if e.firstAlive(g) == e.cfg.ID {
			_ = g.rn.Campaign()
		}
		e.dirty[g.id] = g
	}
}

// firstAlive is the lowest voter of g this member believes alive.
func (e *Engine) firstAlive(g *group) uint64 {
	for _, v := range g.conf.GetVoters() { // sorted by raft
		if v == e.cfg.ID || e.alive[v] {
			return v
		}
	}
	return 0
}

// peerBack wakes the quiesced groups this member leads that peer is a
// replica of: they quiesced without it and must catch it up.
func (e *Engine) peerBack(peer uint64) {
	for _, g := range e.groups {
		if g.quiesced && g.lead == e.cfg.ID && (slices.Contains(g.conf.GetVoters(), peer) || slices.Contains(g.conf.GetLearners(), peer)) {
			e.wake(g)
		}
	}
}

// maybeQuiesce quiesces g if this member leads it and nothing is in
// flight: everything appended is committed and applied, every replica
// believed alive has all of it (and those are, with the leader, a
// majority), and no leadership transfer runs. The followers are told with
// a last heartbeat (beatQuiesce), which carries the commit index; from
// then on no member ticks the group or sends it heartbeats until a
// proposal or a message wakes it, or the leader's member goes silent.
func (e *Engine) maybeQuiesce(g *group) bool {
	if g.rn.HasReady() {
		return false
	}
	st := g.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 {
		return false
	}
	last, err := g.mem.LastIndex()
	commit := st.HardState.GetCommit()
	if err != nil || commit != last || st.Applied != last {
		return false
	}
	ok, caughtUp, voters := true, 1, len(g.conf.GetVoters())
	var followers []uint64
	g.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if id == e.cfg.ID || !e.alive[id] {
			return
		}
		if pr.Match != last {
			ok = false
		}
		if typ == raft.ProgressTypePeer {
			caughtUp++
		}
		followers = append(followers, id)
	})
	if !ok || len(g.conf.GetVotersOutgoing()) > 0 || caughtUp <= voters/2 {
		return false
	}
	for _, id := range followers {
		e.outFrame(id).beats = append(e.outFrame(id).beats, beat{group: g.id, term: st.HardState.GetTerm(), commit: commit, flags: beatQuiesce})
	}
	g.quiesced = true
	delete(e.active, g.id)
	return true
}

func (e *Engine) outFrame(to uint64) *frame {
	f := e.out[to]
	if f == nil {
		f = &frame{}
		e.out[to] = f
	}
	return f
}

// receive steps a peer's messages and beats into their groups. A message
// wakes a quiesced group, except a heartbeat response (the answer to a
// quiescing heartbeat); a quiescing heartbeat quiesces the follower if it
// agrees on leader, term and commit.
func (e *Engine) receive(in inbound) {
	e.heard[in.from] = time.Now()
	if in.f.chunk != nil {
		e.receiveChunk(in.from, in.f.chunk)
		return
	}
	for _, gm := range in.f.msgs {
		g := e.groups[gm.group]
		if g == nil {
			e.dropped.Add(1)
			continue
		}
		e.wake(g)
		_ = g.rn.Step(gm.msg)
		e.dirty[g.id] = g
	}
	for _, h := range in.f.beats {
		g := e.groups[h.group]
		if g == nil {
			e.dropped.Add(1)
			continue
		}
		m := &raftpb.Message{From: proto.Uint64(in.from), To: proto.Uint64(e.cfg.ID), Term: proto.Uint64(h.term)}
		if h.flags&beatResponse != 0 {
			m.Type = raftpb.MsgHeartbeatResp.Enum()
			_ = g.rn.Step(m)
			e.dirty[g.id] = g
			continue
		}
		m.Type, m.Commit = raftpb.MsgHeartbeat.Enum(), proto.Uint64(h.commit)
		if h.flags&beatQuiesce == 0 {
			e.wake(g)
		}
		_ = g.rn.Step(m)
		e.dirty[g.id] = g
		if h.flags&beatQuiesce != 0 {
			st := g.rn.BasicStatus()
			if st.RaftState == raft.StateFollower && st.Lead == in.from && st.HardState.GetTerm() == h.term && st.HardState.GetCommit() == h.commit {
				if !g.quiesced {
					g.quiesced = true
					delete(e.active, g.id)
				}
			} else {
				e.wake(g)
			}
		}
	}
}

type pendingReady struct {
	g  *group
	rd raft.Ready
}

// readyCycle takes the Ready of every group touched since the last cycle,
// writes all their entries, hard states and snapshots in one batch with
// one fsync, then queues their messages, hands their committed entries to
// the appliers and advances them; last it hands each peer its frame.
func (e *Engine) readyCycle() {
	var readies []pendingReady
	b := e.store.newBatch()
	sync := false
	for id, g := range e.dirty {
		delete(e.dirty, id)
		if !g.rn.HasReady() {
			continue
		}
		rd := g.rn.Ready()
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := b.setSnapshot(id, rd.Snapshot); err != nil {
				e.fatal(err)
			}
		}
		stored, err := g.mem.LastIndex()
		if err != nil {
			e.fatal(err)
		}
		if err := b.append(id, rd.Entries, stored); err != nil {
			e.fatal(err)
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			if err := b.setHardState(id, rd.HardState); err != nil {
				e.fatal(err)
			}
		}
		sync = sync || rd.MustSync
		readies = append(readies, pendingReady{g, rd})
	}
	if len(e.afterSync) > 0 {
		sync = true
		if b.n == 0 {
			b.n++ // an empty synced commit: what earlier commits wrote is durable after it
			if err := b.b.LogData(nil, nil); err != nil {
				e.fatal(err)
			}
		}
	}
	if len(readies) > 0 || b.n > 0 {
		if b.n > 0 {
			e.syncs.Add(1)
		}
		var err error
		if sync {
			err = b.commit()
		} else {
			err = b.commitNoSync()
		}
		if err != nil {
			e.fatal(err)
		}
		e.readies.Add(uint64(len(readies)))
	} else {
		b.b.Close()
	}
	for _, f := range e.afterSync {
		f()
	}
	e.afterSync = e.afterSync[:0]
	for i := range readies {
		g, rd := readies[i].g, &readies[i].rd
		if rd.SoftState != nil {
			g.lead = rd.SoftState.Lead
		}
		if g.lead != 0 && (len(g.parked) > 0 || g.resend) {
			defer e.unpark(g) // after Advance: raft takes proposals then
		}
		if !raft.IsEmptySnap(rd.Snapshot) {
			// The database keeps the snapshot's state until the applier
			// restored it (a crash before restores it on restart); raft's
			// storage needs only its metadata.
			if err := g.mem.ApplySnapshot(markSnapshot(rd.Snapshot)); err != nil {
				e.fatal(err)
			}
			g.conf = proto.Clone(raftpb.EnsureConfState(rd.Snapshot.GetMetadata().GetConfState())).(*raftpb.ConfState)
			g.applier.enqueue(applyItem{st: g.app, restore: rd.Snapshot})
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			if err := g.mem.SetHardState(rd.HardState); err != nil {
				e.fatal(err)
			}
		}
		if err := g.mem.Append(rd.Entries); err != nil {
			e.fatal(err)
		}
		e.queueMessages(g, rd.Messages)
		if len(rd.CommittedEntries) > 0 {
			e.commit(g, rd.CommittedEntries)
		}
		g.rn.Advance(*rd)
		if g.rn.HasReady() {
			e.dirty[g.id] = g
		}
	}
	e.flush()
}

// commit applies the configuration changes among committed entries to
// raft (on the loop, as raft requires) and hands all of them to the
// group's applier, with the configuration as of the last.
func (e *Engine) commit(g *group, ents []*raftpb.Entry) {
	force := false
	for _, ent := range ents {
		var cc raftpb.ConfChangeI
		switch ent.GetType() {
		case raftpb.EntryConfChange:
			c := &raftpb.ConfChange{}
			if err := proto.Unmarshal(ent.GetData(), c); err != nil {
				e.fatal(err)
			}
			cc = c
			// A member added catches up from a snapshot; the one it
			// gets must name it, so a fresh one is taken at once.
			force = force || c.GetType() != raftpb.ConfChangeType_ConfChangeRemoveNode
		case raftpb.EntryConfChangeV2:
			c := &raftpb.ConfChangeV2{}
			if err := proto.Unmarshal(ent.GetData(), c); err != nil {
				e.fatal(err)
			}
			cc, force = c, true
		default:
			continue
		}
		g.conf = g.rn.ApplyConfChange(cc)
		e.wake(g)
	}
	g.applier.enqueue(applyItem{st: g.app, ents: ents, conf: proto.Clone(g.conf).(*raftpb.ConfState), forceSnap: force})
}

// queueMessages sorts a Ready's messages per peer: heartbeats and their
// responses into the pair's coalesced beats, the rest as messages. A
// snapshot goes only while fewer than MaxSnapshotsInFlight are being
// sent; otherwise raft hears it failed and retries later.
func (e *Engine) queueMessages(g *group, msgs []*raftpb.Message) {
	for _, m := range msgs {
		to := m.GetTo()
		switch m.GetType() {
		case raftpb.MsgHeartbeat:
			if len(m.GetContext()) == 0 {
				e.outFrame(to).beats = append(e.outFrame(to).beats, beat{group: g.id, term: m.GetTerm(), commit: m.GetCommit()})
				continue
			}
		case raftpb.MsgHeartbeatResp:
			if len(m.GetContext()) == 0 {
				e.outFrame(to).beats = append(e.outFrame(to).beats, beat{group: g.id, term: m.GetTerm(), flags: beatResponse})
				continue
			}
		case raftpb.MsgSnap:
			e.sendSnapshot(g, m)
			continue
		}
		// A quiesced group that sends anything but heartbeats has work
		// again: it ticks until it quiesces anew.
		e.wake(g)
		e.outFrame(to).msgs = append(e.outFrame(to).msgs, groupMsg{group: g.id, msg: m})
	}
}

// sendSnapshot has g's applier build the snapshot of a snapshot message
// from its state on disk and send it, throttled: at most
// MaxSnapshotsInFlight at once on this member; the transport reports back
// when it was written (or failed) and raft hears it then.
func (e *Engine) sendSnapshot(g *group, m *raftpb.Message) {
	if e.snapsOut >= e.cfg.MaxSnapshotsInFlight {
		g.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		return
	}
	e.wake(g)
	e.snapsOut++
	e.snapsSent.Add(1)
	g.applier.enqueue(applyItem{st: g.app, send: m})
}

// snapshotFailed reports, from an applier, a snapshot to member to that
// could not be built or queued. It does not wait for the loop, which may
// be waiting for the applier.
func (e *Engine) snapshotFailed(to, id uint64) {
	go func() {
		select {
		case e.ops <- func() { e.snapshotSent(to, id, false) }:
		case <-e.stop:
		}
	}()
}

// markRestored replaces the data of group id's stored snapshot at index
// with checkpointData once its applier restored it: the state is on disk.
func (e *Engine) markRestored(id, index uint64) {
	g := e.groups[id]
	if g == nil {
		return
	}
	snap, err := g.mem.Snapshot()
	if err != nil || snap.GetMetadata().GetIndex() != index {
		return // a later checkpoint replaced it
	}
	b := e.store.newBatch()
	if err := b.setSnapshot(id, markSnapshot(snap)); err != nil {
		e.fatal(err)
	}
	if err := b.commitNoSync(); err != nil {
		e.fatal(err)
	}
}

// snapshotSent is the transport's report, run on the loop, of a snapshot
// it wrote (or failed to write) to member to.
func (e *Engine) snapshotSent(to, id uint64, ok bool) {
	e.snapsOut--
	g := e.groups[id]
	if g == nil {
		return
	}
	status := raft.SnapshotFinish
	if !ok {
		status = raft.SnapshotFailure
	}
	g.rn.ReportSnapshot(to, status)
	e.dirty[id] = g
}

// flush hands each peer this cycle's frame; the transport's goroutine
// for that peer encodes and writes it. A peer whose queue is full loses
// the frame, and its groups hear the peer is unreachable (raft resends).
func (e *Engine) flush() {
	for to, f := range e.out {
		delete(e.out, to)
		if e.tr.send(to, f, nil) {
			continue
		}
		e.dropped.Add(uint64(len(f.msgs) + len(f.beats)))
		for _, gm := range f.msgs {
			if g := e.groups[gm.group]; g != nil {
				g.rn.ReportUnreachable(to)
				e.dirty[g.id] = g
			}
		}
	}
}

// installSnapshot records the checkpoint an applier took of group id at
// index: raft's storage compacts the log before it, and the database
// holds the checkpoint (checkpointData: the state is on disk) instead of
// those entries. It is durable with the next synced commit (a crash
// before keeps the entries, and the state's applied record says where to
// go on from).
func (e *Engine) installSnapshot(id, index uint64, conf *raftpb.ConfState, data []byte) {
	g := e.groups[id]
	if g == nil {
		return
	}
	snap, err := g.mem.CreateSnapshot(index, conf, data)
	if err != nil {
		return // a newer snapshot came from the leader meanwhile
	}
	b := e.store.newBatch()
	if err := b.setSnapshot(id, snap); err != nil {
		e.fatal(err)
	}
	if err := b.commitNoSync(); err != nil {
		e.fatal(err)
	}
	if err := g.mem.Compact(index); err != nil && err != raft.ErrCompacted {
		e.fatal(err)
	}
	e.snapshots.Add(1)
}

// fatal stops the process: the loop cannot go on after its database
// failed (raft's state on disk and in memory would differ).
func (e *Engine) fatal(err error) {
	e.cfg.Logger.Error("multiraft: storage failed", "id", e.cfg.ID, "err", err)
	panic("multiraft: storage failed: " + err.Error())
}
