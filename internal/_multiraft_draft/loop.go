package multiraft

import (
	"encoding/binary"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
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
	for {
		select {
		case <-e.stop:
			return
		case <-ticker.C:
			e.tick()
		case in := <-e.inbox:
			e.receive(in)
		case op := <-e.ops:
			op()
		}
	drain:
		for range drainMax {
			select {
			case in := <-e.inbox:
				e.receive(in)
			case op := <-e.ops:
				op()
			default:
				break drain
			}
		}
		e.readyCycle()
	}
}

// tick advances raft's clock of the groups that are not quiesced, lets
// leaders with nothing in flight quiesce, and wakes the quiesced groups
// whose leader stopped answering.
func (e *Engine) tick() {
	now := time.Now().UnixNano()
	for id, p := range e.peers {
		alive := now-p.lastHeard.Load() < int64(e.electionSpan)
		if e.alive[id] && !alive {
			e.leaderLost(id)
		}
		e.alive[id] = alive
	}
	for id, g := range e.active {
		// Before the tick, while the last cycle left nothing to do: a
		// tick makes a leader's heartbeats.
		if e.maybeQuiesce(g) {
			continue
		}
		g.rn.Tick()
		e.dirty[id] = g
	}
}

// leaderLost wakes every quiesced group led by peer, so that they tick,
// time out and elect among the members that remain.
func (e *Engine) leaderLost(peer uint64) {
	for _, g := range e.groups {
		if g.quiesced && g.rn.BasicStatus().Lead == peer {
			e.wake(g)
		}
	}
}

// maybeQuiesce quiesces g if this member leads it and nothing is in
// flight: everything appended is committed and applied here, every
// replica has all of it, no proposal of this member waits and no
// leadership transfer runs. The followers are told with the last
// heartbeat (beatQuiesce), which carries the commit index; from then on
// no member ticks the group or sends it heartbeats until a proposal or a
// message wakes it.
func (e *Engine) maybeQuiesce(g *group) bool {
	if len(g.waiters) > 0 || g.rn.HasReady() {
		return false
	}
	st := g.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 {
		return false
	}
	last, err := g.mem.LastIndex()
	if err != nil || st.Commit != last || g.applied != last {
		return false
	}
	caughtUp := true
	var followers []uint64
	g.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == e.cfg.ID {
			return
		}
		if pr.Match != last || !e.alive[id] {
			caughtUp = false
		}
		followers = append(followers, id)
	})
	if !caughtUp {
		return false
	}
	for _, id := range followers {
		e.outBeats[id] = append(e.outBeats[id], beat{group: g.id, term: st.Term, commit: st.Commit, flags: beatQuiesce})
	}
	g.quiesced = true
	delete(e.active, g.id)
	return true
}

// receive steps a peer's messages and beats into their groups. A message
// wakes a quiesced group, except a heartbeat response (the answers to a
// quiescing heartbeat) and a quiescing heartbeat itself, after which the
// follower quiesces too if it agrees on leader and term.
func (e *Engine) receive(in inbound) {
	for i := range in.msgs {
		gm := &in.msgs[i]
		g := e.groups[gm.group]
		if g == nil {
			e.stats.Dropped++
			continue
		}
		e.wake(g)
		_ = g.rn.Step(gm.msg)
		e.dirty[g.id] = g
	}
	for _, h := range in.beats {
		g := e.groups[h.group]
		if g == nil {
			e.stats.Dropped++
			continue
		}
		m := raftpb.Message{From: in.from, To: e.cfg.ID, Term: h.term}
		if h.flags&beatResponse != 0 {
			m.Type = raftpb.MsgHeartbeatResp
			_ = g.rn.Step(m)
			e.dirty[g.id] = g
			continue
		}
		m.Type, m.Commit = raftpb.MsgHeartbeat, h.commit
		if h.flags&beatQuiesce == 0 {
			e.wake(g)
		}
		_ = g.rn.Step(m)
		e.dirty[g.id] = g
		if h.flags&beatQuiesce != 0 {
			st := g.rn.BasicStatus()
			if st.RaftState == raft.StateFollower && st.Lead == in.from && st.Term == h.term && st.Commit == h.commit {
				g.quiesced = true
				delete(e.active, g.id)
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
// one fsync, then sends their messages, applies their committed entries
// and advances them.
func (e *Engine) readyCycle() {
	var readies []pendingReady
	b := e.store.newBatch()
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
		if err := b.append(id, rd.Entries); err != nil {
			e.fatal(err)
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			if err := b.setHardState(id, rd.HardState); err != nil {
				e.fatal(err)
			}
		}
		readies = append(readies, pendingReady{g, rd})
	}
	if len(readies) == 0 {
		e.flush()
		return
	}
	if b.n > 0 {
		e.stats.Syncs++
	}
	if err := b.commit(); err != nil {
		e.fatal(err)
	}
	e.stats.ReadyGroups += uint64(len(readies))
	for i := range readies {
		g, rd := readies[i].g, &readies[i].rd
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := g.mem.ApplySnapshot(rd.Snapshot); err != nil {
				e.fatal(err)
			}
			if err := g.sm.Restore(rd.Snapshot.Data); err != nil {
				e.fatal(err)
			}
			g.conf = rd.Snapshot.Metadata.ConfState
			g.applied, g.snapIndex = rd.Snapshot.Metadata.Index, rd.Snapshot.Metadata.Index
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			_ = g.mem.SetHardState(rd.HardState)
		}
		if err := g.mem.Append(rd.Entries); err != nil {
			e.fatal(err)
		}
		e.queueMessages(g, rd.Messages)
		e.apply(g, rd.CommittedEntries)
		g.rn.Advance(*rd)
		e.maybeSnapshot(g)
		if g.rn.HasReady() {
			e.dirty[g.id] = g
		}
	}
	e.flush()
}

// queueMessages sorts a Ready's messages per peer: heartbeats and their
// responses into the pair's coalesced beats, the rest as messages. A
// snapshot goes only while fewer than MaxSnapshotsInFlight are being
// sent; otherwise raft hears it failed and retries later.
func (e *Engine) queueMessages(g *group, msgs []raftpb.Message) {
	for _, m := range msgs {
		switch m.Type {
		case raftpb.MsgHeartbeat:
			e.outBeats[m.To] = append(e.outBeats[m.To], beat{group: g.id, term: m.Term, commit: m.Commit})
			continue
		case raftpb.MsgHeartbeatResp:
			e.outBeats[m.To] = append(e.outBeats[m.To], beat{group: g.id, term: m.Term, flags: beatResponse})
			continue
		case raftpb.MsgSnap:
			if e.snapsOut >= e.cfg.MaxSnapshotsInFlight || e.peers[m.To] == nil {
				g.rn.ReportSnapshot(m.To, raft.SnapshotFailure)
				continue
			}
			e.snapsOut++
			e.stats.SnapshotsSent++
		}
		// A quiesced group that sends anything but heartbeats has work
		// again: it ticks until it quiesces anew.
		e.wake(g)
		e.outMsgs[m.To] = append(e.outMsgs[m.To], groupMsg{group: g.id, msg: m})
	}
}

// flush hands each peer this cycle's messages and beats in one batch; the
// peer's goroutine marshals and writes them. A peer whose queue is full
// loses the batch: raft resends what matters (a snapshot is reported
// failed, appends are retried after the unreachable report).
func (e *Engine) flush() {
	for id, p := range e.peers {
		msgs, beats := e.outMsgs[id], e.outBeats[id]
		if len(msgs) == 0 && len(beats) == 0 {
			continue
		}
		delete(e.outMsgs, id)
		delete(e.outBeats, id)
		if p.enqueue(outBatch{msgs: msgs, beats: beats}) {
			continue
		}
		e.stats.Dropped += uint64(len(msgs) + len(beats))
		e.sendFailed(id, msgs)
	}
	// Messages to a member that is not a peer (a configuration naming an
	// unknown id) have nowhere to go.
	for id, msgs := range e.outMsgs {
		e.stats.Dropped += uint64(len(msgs))
		e.sendFailed(id, msgs)
		delete(e.outMsgs, id)
	}
	for id := range e.outBeats {
		delete(e.outBeats, id)
	}
}

// sendFailed tells the groups of msgs that peer to did not get them.
func (e *Engine) sendFailed(to uint64, msgs []groupMsg) {
	for _, gm := range msgs {
		g := e.groups[gm.group]
		if gm.msg.Type == raftpb.MsgSnap {
			e.snapsOut--
		}
		if g == nil {
			continue
		}
		if gm.msg.Type == raftpb.MsgSnap {
			g.rn.ReportSnapshot(to, raft.SnapshotFailure)
		}
		g.rn.ReportUnreachable(to)
		e.dirty[g.id] = g
	}
}

// snapshotSent is the peer's report, run on the loop, of a snapshot it
// wrote (or failed to write) to the connection.
func (e *Engine) snapshotSent(to, group uint64, ok bool) {
	e.snapsOut--
	g := e.groups[group]
	if g == nil {
		return
	}
	status := raft.SnapshotFinish
	if !ok {
		status = raft.SnapshotFailure
	}
	g.rn.ReportSnapshot(to, status)
	e.wake(g)
	e.dirty[group] = g
}

// apply hands committed entries to the state machine and their results to
// the proposals of this member that wait for them.
func (e *Engine) apply(g *group, ents []raftpb.Entry) {
	for i := range ents {
		ent := &ents[i]
		switch ent.Type {
		case raftpb.EntryNormal:
			if len(ent.Data) > 0 {
				proposer, seq, cmd, ok := parseEnvelope(ent.Data)
				var out []byte
				if ok {
					out = g.sm.Apply(ent.Index, cmd)
				}
				e.answer(g, proposer, seq, result{value: out})
			}
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := cc.Unmarshal(ent.Data); err != nil {
				e.fatal(err)
			}
			g.conf = *g.rn.ApplyConfChange(cc)
			if proposer, seq, _, ok := parseEnvelope(cc.Context); ok {
				e.answer(g, proposer, seq, result{})
			}
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if err := cc.Unmarshal(ent.Data); err != nil {
				e.fatal(err)
			}
			g.conf = *g.rn.ApplyConfChange(cc)
		}
		g.applied = ent.Index
	}
}

func (e *Engine) answer(g *group, proposer, seq uint64, r result) {
	if proposer != e.cfg.ID {
		return
	}
	if ch, ok := g.waiters[seq]; ok {
		ch <- r
		delete(g.waiters, seq)
	}
}

// parseEnvelope splits an entry into its proposer, the proposal's number
// on it and the command.
func parseEnvelope(b []byte) (proposer, seq uint64, cmd []byte, ok bool) {
	proposer, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, false
	}
	seq, m := binary.Uvarint(b[n:])
	if m <= 0 {
		return 0, 0, nil, false
	}
	return proposer, seq, b[n+m:], true
}

// maybeSnapshot checkpoints g's state machine every SnapshotEntries
// applied entries and drops the log it covers, so a restart restores the
// checkpoint and replays only the tail.
func (e *Engine) maybeSnapshot(g *group) {
	if g.applied-g.snapIndex < e.cfg.SnapshotEntries {
		return
	}
	data, err := g.sm.Snapshot()
	if err != nil {
		e.cfg.Logger.Warn("multiraft: snapshot failed", "group", g.id, "err", err)
		return
	}
	snap, err := g.mem.CreateSnapshot(g.applied, &g.conf, data)
	if err != nil {
		return
	}
	b := e.store.newBatch()
	if err := b.setSnapshot(g.id, snap); err != nil {
		e.fatal(err)
	}
	// The snapshot and the dropped entries go in one batch, durable with
	// the next sync: a crash keeps both or neither.
	if err := b.commitNoSync(); err != nil {
		e.fatal(err)
	}
	_ = g.mem.Compact(g.applied)
	g.snapIndex = g.applied
	e.stats.Snapshots++
}

// fatal stops the process: the loop cannot go on after its database
// failed (raft's state on disk and in memory would differ).
func (e *Engine) fatal(err error) {
	e.cfg.Logger.Error("multiraft: storage failed", "err", err)
	panic("multiraft: storage failed: " + err.Error())
}
