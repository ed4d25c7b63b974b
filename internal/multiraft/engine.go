package multiraft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Engine runs every raft group of one member. One goroutine, the loop,
// owns every group's raft state and writes the database; a few appliers
// (Config.Appliers) run the state machines; the transport's goroutines
// move frames. No goroutine is per group.
type Engine struct {
	cfg   Config
	store *store
	tr    Transport
	apps  []*applier

	ops  chan func()
	stop chan struct{}
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup // the appliers

	seq atomic.Uint64
	// inc is this opening's incarnation, in the identity of proposals.
	inc uint64
	// resends are the groups whose applier asked the loop to propose
	// again this member's proposals not applied yet (true: at once, a
	// leader change lost some).
	rmu     sync.Mutex
	resends map[uint64]bool
	pmu     sync.Mutex
	pending map[uint64]*waiter // this member's proposals by number

	snapGate snapGate

	// Counters, read by Stats from any goroutine.
	syncs, readies, snapshots, snapsSent, dropped, woken atomic.Uint64
	applied, restores                                    atomic.Uint64
	nGroups, nActive                                     atomic.Int64

	// Owned by the loop.
	groups   map[uint64]*group
	active   map[uint64]*group // ticked: not quiesced
	dirty    map[uint64]*group // stepped, ticked or proposed to since the last ready cycle
	heard    map[uint64]time.Time
	alive    map[uint64]bool
	out      map[uint64]*frame
	snapsOut int
	staging  *snapStaging // snapshots arriving in chunks
	ticks    int
	// afterSync runs once the cycle's commit is synced: operations that
	// return when what they wrote is durable.
	afterSync []func()
}

// group is one raft group on this member, owned by the loop.
type group struct {
	id uint64
	// parked are this member's proposals raft dropped because the group
	// knew no leader: proposed again, in order, once it knows one.
	parked []parkedProposal
	// sent are this member's proposals with an identity not seen applied
	// yet, by sequence; nextSeq is the last sequence handed out.
	sent    []sentProposal
	nextSeq uint64
	resend  bool // propose sent again once the group knows a leader
	// resentAt and resentFrom are the last resend's time and the
	// sequence then applied next: an entry ahead of that same sequence
	// soon after is the resend's own effect, not a new loss.
	resentAt   time.Time
	resentFrom uint64
	rn         *raft.RawNode
	mem        *raft.MemoryStorage
	conf       *raftpb.ConfState
	lead       uint64
	quiesced   bool
	app        *applyState // handed to the group's applier with each batch
	applier    *applier
}

type waiter struct {
	group uint64
	// term is the group's term on this member when the proposal was
	// handed to raft: once the group applies an entry of a later term
	// without having applied this one, the proposal was lost in a leader
	// change (or is late) and fails with ErrLeaderChanged.
	term uint64
	// normal is a Propose's: proposed again, not failed, when a leader
	// change loses it.
	normal bool
	ch     chan result
}

// parkedProposal is a proposal waiting for its group to know a leader.
type parkedProposal struct {
	seq    uint64
	normal bool
	env    []byte // its envelope once it has one
	prop   func(*group, []byte) error
}

// sentProposal is a proposal with an identity handed to raft and not
// seen applied: what a resend proposes again.
type sentProposal struct {
	gseq, seq uint64
	env       []byte
	prop      func(*group, []byte) error
}

type result struct {
	value []byte
	err   error
}

// Stats counts what the engine did, for tests and metrics.
type Stats struct {
	Groups        int    // groups on this member
	Active        int    // groups not quiesced
	Syncs         uint64 // database commits of ready cycles (one per cycle that wrote)
	ReadyGroups   uint64 // group readies handled, over all cycles
	Snapshots     uint64 // checkpoints taken of state machines
	SnapshotsSent uint64
	Dropped       uint64 // frames and messages dropped: unknown group, refused, queue full
	Woken         uint64 // quiesced groups woken
	// Applied counts the entries state machines applied, a restart's
	// replay included (the entries the applied records cover are not);
	// Restores the snapshots restored (from a leader, or on restart: a
	// checkpoint of format 1 or one received and not restored before).
	Applied  uint64
	Restores uint64
}

// New opens the member's database, restarts every group it holds (each
// restored from its snapshot; raft then replays the log after it) and
// starts the loop and the appliers.
func New(c Config) (*Engine, error) {
	cfg, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := openStore(cfg.Dir, cfg.FS)
	if err != nil {
		return nil, err
	}
	inc, err := st.nextIncarnation()
	if err != nil {
		_ = st.close()
		return nil, err
	}
	e := &Engine{
		cfg:     cfg,
		store:   st,
		inc:     inc,
		tr:      cfg.Transport,
		ops:     make(chan func(), 1024),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		pending: map[uint64]*waiter{},
		resends: map[uint64]bool{},
		groups:  map[uint64]*group{},
		active:  map[uint64]*group{},
		dirty:   map[uint64]*group{},
		heard:   map[uint64]time.Time{},
		alive:   map[uint64]bool{},
		out:     map[uint64]*frame{},
	}
	e.snapGate.every = cfg.SnapshotInterval
	e.staging = newSnapStaging(cfg.MaxSnapshotStaging, cfg.SnapshotChunkTimeout)
	for range cfg.Appliers {
		e.apps = append(e.apps, newApplier(e))
	}
	ids, err := st.groups()
	if err == nil {
		for _, id := range ids {
			if err = e.restartGroup(id); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = st.converted()
	}
	if err != nil {
		_ = st.close()
		return nil, err
	}
	now := time.Now()
	for _, id := range e.tr.members() {
		e.heard[id], e.alive[id] = now, true // until an election timeout passes without a frame
	}
	for _, a := range e.apps {
		e.wg.Add(1)
		go func() { defer e.wg.Done(); a.run() }()
	}
	go e.loop()
	return e, nil
}

// Close stops the loop and the appliers, fails what waits with ErrClosed
// and closes the database. It does not close the transport.
func (e *Engine) Close() error {
	var err error
	e.once.Do(func() {
		close(e.stop)
		<-e.done
		e.wg.Wait()
		e.pmu.Lock()
		for seq, w := range e.pending {
			w.ch <- result{err: ErrClosed}
			delete(e.pending, seq)
		}
		e.pmu.Unlock()
		err = e.store.close()
	})
	return err
}

func (e *Engine) raftConfig(g *group, applied uint64) *raft.Config {
	return &raft.Config{
		ID:                        e.cfg.ID,
		ElectionTick:              e.cfg.ElectionTicks,
		HeartbeatTick:             e.cfg.HeartbeatTicks,
		Storage:                   g.mem,
		Applied:                   applied,
		MaxSizePerMsg:             maxSizePerMsg,
		MaxInflightMsgs:           maxInflightMsgs,
		MaxCommittedSizePerReady:  uint64(min(maxCommittedPerReady, e.cfg.MaxApplyBytes)),
		MaxUncommittedEntriesSize: maxUncommittedBytes,
		// As meta/raft: CheckQuorum makes a leader cut off from a majority
		// step down, so a minority commits nothing; PreVote keeps a member
		// coming back from deposing a healthy leader.
		CheckQuorum:       true,
		PreVote:           true,
		StepDownOnRemoval: true,
		Logger:            discardLogger{},
	}
}

// restartGroup rebuilds group id from the database: its entries and hard
// state into raft's storage, its state machine from its data on disk,
// which is complete up to the group's applied record. Raft hands back the
// committed entries after the group's snapshot; the applier skips those
// the applied record covers, so the state machine applies only what it
// had not written yet (their configuration changes still reach raft). A
// group whose applied record is behind its snapshot (format 1's
// checkpoints, or a snapshot from the leader not restored before a crash)
// is restored from the snapshot's data first, in one batch that also
// replaces the snapshot's data with checkpointData.
func (e *Engine) restartGroup(id uint64) error {
	l, err := e.store.load(id)
	if err != nil {
		return err
	}
	g := e.newGroup(id)
	md := l.snap.GetMetadata()
	if md.GetIndex() > 0 {
		if err := g.mem.ApplySnapshot(markSnapshot(l.snap)); err != nil {
			return fmt.Errorf("multiraft: group %d: %w", id, err)
		}
		g.conf = proto.Clone(raftpb.EnsureConfState(md.GetConfState())).(*raftpb.ConfState)
	}
	rec, ok, err := e.store.applied(id)
	if err != nil {
		return err
	}
	if !ok || rec.index < md.GetIndex() {
		if isCheckpointMark(l.snap.GetData()) {
			return fmt.Errorf("multiraft: group %d: its checkpoint at index %d says its state is on disk, but the state on disk is at index %d (the database lost writes)", id, md.GetIndex(), rec.index)
		}
		rec = appliedRecord{index: md.GetIndex(), term: md.GetTerm(), conf: g.conf}
		if err := e.restoreData(g.app, l.snap, true); err != nil {
			return fmt.Errorf("multiraft: group %d: restore its snapshot: %w", id, err)
		}
		e.restores.Add(1)
	}
	if err := g.app.sm.Load(g.app.data); err != nil {
		return fmt.Errorf("multiraft: group %d: load its state: %w", id, err)
	}
	if g.app.dedup, err = e.store.loadDedup(id); err != nil {
		return err
	}
	g.app.mine.Store(1) // a new incarnation: none of its proposals applied
	g.app.sm.Committed()
	g.app.applied, g.app.snapIndex, g.app.term = rec.index, md.GetIndex(), rec.term
	g.app.conf = proto.Clone(raftpb.EnsureConfState(rec.conf)).(*raftpb.ConfState)
	if err := g.mem.Append(l.ents); err != nil {
		return fmt.Errorf("multiraft: group %d: %w", id, err)
	}
	// The configuration changes in the log after the snapshot are applied
	// again by raft as they are handed back; the group's conf follows them.
	if !raft.IsEmptyHardState(l.hs) {
		if err := g.mem.SetHardState(l.hs); err != nil {
			return fmt.Errorf("multiraft: group %d: %w", id, err)
		}
	}
	return e.startGroup(g, md.GetIndex())
}

// restoreData replaces st's data on disk with snap's state, in one
// batch: the group's data range deleted, the state machine's Restore, the
// applied record at the snapshot's index and, when rewrite is set (on
// restart, the loop not running), the stored snapshot's data replaced by
// checkpointData. It runs on the group's applier, or before the loop
// starts.
func (e *Engine) restoreData(st *applyState, snap *raftpb.Snapshot, rewrite bool) error {
	md := snap.GetMetadata()
	b := e.store.newDataBatch(st.group)
	lo, hi := dataRange(st.group)
	if err := b.b.DeleteRange(lo, hi, nil); err != nil {
		b.b.Close()
		return err
	}
	dedup, smData, err := unwrapSnapshot(snap.GetData())
	if err == nil {
		err = st.sm.Restore(b, smData)
	}
	if err == nil {
		err = b.b.Set(dedupKey(st.group), encodeDedup(dedup), nil)
	}
	if err != nil {
		b.b.Close()
		return err
	}
	if rewrite {
		v, err := proto.Marshal(markSnapshot(snap))
		if err == nil {
			err = b.b.Set(groupKey('s', st.group), v, nil)
		}
		if err != nil {
			b.b.Close()
			return err
		}
	}
	if err := e.store.commitData(b, st.group, appliedRecord{index: md.GetIndex(), term: md.GetTerm(), conf: md.GetConfState()}); err != nil {
		return err
	}
	st.dedup = dedup
	st.mine.Store(dedup.next(e.cfg.ID, e.inc))
	return nil
}

// markSnapshot is snap with checkpointData for its data: what raft's
// storage and the database keep once the state is on disk (a snapshot
// sent to a replica is built from the state, not from it).
func markSnapshot(snap *raftpb.Snapshot) *raftpb.Snapshot {
	return &raftpb.Snapshot{Metadata: snap.GetMetadata(), Data: checkpointData}
}

func (e *Engine) newGroup(id uint64) *group {
	a := e.apps[id%uint64(len(e.apps))]
	return &group{
		id: id, mem: raft.NewMemoryStorage(), conf: &raftpb.ConfState{}, applier: a,
		app: &applyState{group: id, sm: e.cfg.NewStateMachine(id), data: e.store.data(id), conf: &raftpb.ConfState{}},
	}
}

func (e *Engine) startGroup(g *group, applied uint64) error {
	rn, err := raft.NewRawNode(e.raftConfig(g, applied))
	if err != nil {
		return fmt.Errorf("multiraft: group %d: %w", g.id, err)
	}
	g.rn = rn
	e.groups[g.id] = g
	e.active[g.id] = g
	e.dirty[g.id] = g
	e.nGroups.Store(int64(len(e.groups)))
	return nil
}

// do runs f on the loop and waits for it.
func (e *Engine) do(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case e.ops <- func() { f(); close(done) }:
	case <-e.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-e.stop:
		return ErrClosed
	}
}

// CreateGroup creates group id on this member. With voters, it is a new
// group whose initial members are those voters (every one of them calls
// CreateGroup with the same list, this member among them); without, this
// member joins an existing group as an empty replica and waits for the
// leader's AddReplica or AddLearner to reach it.
func (e *Engine) CreateGroup(ctx context.Context, id uint64, voters []uint64) error {
	return e.CreateGroupWithLearners(ctx, id, voters, nil)
}

// CreateGroupWithLearners is CreateGroup for a new group whose initial
// configuration also has learners: non-voting replicas that receive and
// apply the log (and may propose, through the leader) but count for no
// quorum and never lead. Every initial member, voter or learner, calls it
// with the same lists.
func (e *Engine) CreateGroupWithLearners(ctx context.Context, id uint64, voters, learners []uint64) error {
	if err := checkGroupID(id); err != nil {
		return err
	}
	if len(voters) > 0 && !slices.Contains(voters, e.cfg.ID) && !slices.Contains(learners, e.cfg.ID) {
		return fmt.Errorf("multiraft: group %d: the voters %v and learners %v do not include this member (%d)", id, voters, learners, e.cfg.ID)
	}
	if len(voters) == 0 && len(learners) > 0 {
		return fmt.Errorf("multiraft: group %d: learners without voters", id)
	}
	for _, v := range append(slices.Clone(voters), learners...) {
		if v == 0 {
			return fmt.Errorf("multiraft: group %d: member id 0", id)
		}
		if slices.Contains(voters, v) && slices.Contains(learners, v) {
			return fmt.Errorf("multiraft: group %d: member %d is both a voter and a learner", id, v)
		}
	}
	errc := make(chan error, 1)
	if err := e.do(ctx, func() {
		if err := e.createGroup(id, voters, learners); err != nil {
			errc <- err
			return
		}
		// Durable with the cycle's fsync, which many creations share.
		e.afterSync = append(e.afterSync, func() { errc <- nil })
	}); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	case <-e.stop:
		return ErrClosed
	}
}

func (e *Engine) createGroup(id uint64, voters, learners []uint64) error {
	if e.groups[id] != nil {
		return ErrGroupExists
	}
	g := e.newGroup(id)
	b := e.store.newBatch()
	b.createGroup(id)
	var applied uint64
	if len(voters) > 0 {
		// Every initial member starts from the same snapshot at index 1
		// holding the configuration (and the empty state), so there is
		// nothing to replay, and a member added later catches up from the
		// leader's log or a snapshot of it.
		vs := slices.Compact(slices.Sorted(slices.Values(voters)))
		var ls []uint64
		if len(learners) > 0 {
			ls = slices.Compact(slices.Sorted(slices.Values(learners)))
		}
		snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
			Index: proto.Uint64(1), Term: proto.Uint64(1), ConfState: &raftpb.ConfState{Voters: vs, Learners: ls},
		}}
		hs := &raftpb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(1), Vote: proto.Uint64(0)}
		if err := b.setFirstSnapshot(id, snap); err != nil {
			return err
		}
		if err := b.setHardState(id, hs); err != nil {
			return err
		}
		if err := g.mem.ApplySnapshot(snap); err != nil {
			return err
		}
		if err := g.mem.SetHardState(hs); err != nil {
			return err
		}
		g.conf = &raftpb.ConfState{Voters: vs, Learners: ls}
		g.app.applied, g.app.snapIndex, g.app.term, applied = 1, 1, 1, 1
		g.app.conf = proto.Clone(g.conf).(*raftpb.ConfState)
		v, err := encodeApplied(appliedRecord{index: 1, term: 1, conf: g.conf})
		if err != nil {
			return err
		}
		if err := b.b.Set(groupKey('a', id), v, nil); err != nil {
			return err
		}
	}
	if err := b.commitNoSync(); err != nil {
		return fmt.Errorf("multiraft: create group %d: %w", id, err)
	}
	if err := g.app.sm.Load(g.app.data); err != nil {
		return fmt.Errorf("multiraft: create group %d: %w", id, err)
	}
	return e.startGroup(g, applied)
}

// RemoveGroup deletes group id from this member: its raft state, its log
// and its state machine. What waits on it fails with ErrGroupRemoved.
// The other members keep their replicas (RemoveReplica first, to shrink
// the group rather than lose a replica).
func (e *Engine) RemoveGroup(ctx context.Context, id uint64) error {
	var err error
	if derr := e.do(ctx, func() {
		g := e.groups[id]
		if g == nil {
			err = ErrNoGroup
			return
		}
		b := e.store.newBatch()
		if err = b.removeGroup(id); err != nil {
			b.b.Close()
			return
		}
		if err = b.commit(); err != nil {
			return
		}
		delete(e.groups, id)
		delete(e.active, id)
		delete(e.dirty, id)
		e.nGroups.Store(int64(len(e.groups)))
		g.applier.enqueue(applyItem{st: g.app, removed: true})
		e.failGroup(id, ErrGroupRemoved)
	}); derr != nil {
		return derr
	}
	return err
}

func (e *Engine) failGroup(id uint64, err error) {
	e.pmu.Lock()
	defer e.pmu.Unlock()
	for seq, w := range e.pending {
		if w.group == id {
			w.ch <- result{err: err}
			delete(e.pending, seq)
		}
	}
}

// Propose replicates command in group id and returns what the group's
// state machine on this member returned when it applied it. Any replica
// takes proposals (raft forwards them to the leader). An error other than
// the context's means the command was not committed; the context's means
// it may or may not be.
func (e *Engine) Propose(ctx context.Context, id uint64, command []byte) ([]byte, error) {
	return e.propose(ctx, id, true, func(g *group, env []byte) error {
		return g.rn.Propose(append(env[:len(env):len(env)], command...))
	})
}

// AddReplica adds member as a voter of group id (a raft configuration
// change), or promotes it when it is a learner. The member creates the
// group without voters first; it catches up from a snapshot.
func (e *Engine) AddReplica(ctx context.Context, id, member uint64) error {
	return e.confChange(ctx, id, raftpb.ConfChangeType_ConfChangeAddNode, member)
}

// AddLearner adds member as a non-voting replica of group id, which a
// later AddReplica promotes once it caught up.
func (e *Engine) AddLearner(ctx context.Context, id, member uint64) error {
	return e.confChange(ctx, id, raftpb.ConfChangeType_ConfChangeAddLearnerNode, member)
}

// RemoveReplica removes member from group id's configuration. The removed
// member keeps its copy until its RemoveGroup.
func (e *Engine) RemoveReplica(ctx context.Context, id, member uint64) error {
	return e.confChange(ctx, id, raftpb.ConfChangeType_ConfChangeRemoveNode, member)
}

func (e *Engine) confChange(ctx context.Context, id uint64, t raftpb.ConfChangeType, member uint64) error {
	if member == 0 {
		return errors.New("multiraft: member id 0")
	}
	_, err := e.propose(ctx, id, false, func(g *group, env []byte) error {
		return g.rn.ProposeConfChange(&raftpb.ConfChange{Type: t.Enum(), NodeId: proto.Uint64(member), Context: env})
	})
	return err
}

// propose registers a waiter under a fresh number, proposes on the loop
// and waits for the entry to be applied on this member. A proposal raft
// drops because the group knows no leader is parked and proposed again
// once it knows one (it was not in any log, so this cannot commit it
// twice); one handed to raft that a leader change loses fails with
// ErrLeaderChanged, and one that is neither applied nor known lost within
// Config.ProposalTimeout (lost on its way to the leader) with
// ErrProposalLost: both mean the outcome is unknown. Nothing waits
// forever and nothing is reported committed that was not.
func (e *Engine) propose(ctx context.Context, id uint64, normal bool, prop func(*group, []byte) error) ([]byte, error) {
	seq := e.seq.Add(1)
	ch := make(chan result, 1)
	e.pmu.Lock()
	if len(e.pending) >= e.cfg.MaxPendingProposals {
		e.pmu.Unlock()
		return nil, ErrBusy
	}
	w := &waiter{group: id, normal: normal, ch: ch}
	e.pending[seq] = w
	e.pmu.Unlock()
	forget := func() {
		e.pmu.Lock()
		delete(e.pending, seq)
		e.pmu.Unlock()
	}
	var err error
	if derr := e.do(ctx, func() {
		g := e.groups[id]
		if g == nil {
			err = ErrNoGroup
			return
		}
		e.wake(g)
		err = e.proposeOn(g, &parkedProposal{seq: seq, normal: normal, prop: prop})
		e.dirty[id] = g
	}); derr != nil {
		forget()
		return nil, derr
	}
	if err != nil {
		forget()
		return nil, err
	}
	timeout := time.NewTimer(e.cfg.ProposalTimeout)
	defer timeout.Stop()
	select {
	case r := <-ch:
		return r.value, r.err
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-timeout.C:
		forget()
		return nil, ErrProposalLost
	case <-e.stop:
		return nil, ErrClosed
	}
}

// proposeOn hands proposal p to g's raft, on the loop, recording the
// term it was proposed in; when raft drops it for want of a leader it is
// parked until the group knows one. A Propose's proposal gets its
// identity the first time: the group's next sequence of this member,
// kept in g.sent until it is seen applied (a resend may propose it
// again; the applier skips copies).
func (e *Engine) proposeOn(g *group, p *parkedProposal) error {
	st := g.rn.BasicStatus()
	e.pmu.Lock()
	w := e.pending[p.seq]
	if w != nil {
		w.term = st.HardState.GetTerm()
	}
	e.pmu.Unlock()
	if w == nil && p.env == nil {
		return nil // its caller gave up before it had a sequence
	}
	if p.env == nil {
		if !p.normal {
			p.env = binary.AppendUvarint(binary.AppendUvarint(make([]byte, 0, 20), e.cfg.ID), p.seq)
		} else {
			if len(g.sent) >= e.cfg.MaxPendingProposals {
				return ErrBusy
			}
			g.nextSeq++
			p.env = appendEnvelope2(make([]byte, 0, 40), e.cfg.ID, e.inc, g.nextSeq, p.seq)
			g.sent = append(g.sent, sentProposal{gseq: g.nextSeq, seq: p.seq, env: p.env, prop: p.prop})
		}
	}
	if st.Lead == 0 {
		g.parked = append(g.parked, *p)
		return nil
	}
	err := p.prop(g, p.env)
	if errors.Is(err, raft.ErrProposalDropped) {
		g.parked = append(g.parked, *p)
		return nil
	}
	return err
}

// unpark proposes again what g parked, once it knows a leader, and what
// it sent and did not see applied when a resend waits.
func (e *Engine) unpark(g *group) {
	if g.rn.BasicStatus().Lead == 0 {
		return
	}
	if g.resend {
		e.resendOn(g, true)
	}
	if len(g.parked) == 0 {
		return
	}
	parked := g.parked
	g.parked = nil
	for i := range parked {
		p := &parked[i]
		if err := e.proposeOn(g, p); err != nil {
			e.answer(p.seq, result{err: err})
		}
		if len(g.parked) > 0 { // dropped again: keep the rest, in order
			g.parked = append(g.parked, parked[i+1:]...)
			break
		}
	}
	e.dirty[g.id] = g
}

// requestResend asks the loop, from group id's applier, to propose again
// this member's proposals to it not applied yet: at once (force) when a
// leader change lost some, else when the last resend is not recent. It
// never blocks the applier, which the loop may be waiting for.
func (e *Engine) requestResend(id uint64, force bool) {
	e.rmu.Lock()
	e.resends[id] = e.resends[id] || force
	e.rmu.Unlock()
	select {
	case e.ops <- func() {}: // wake the loop
	default: // it is busy: it takes the requests before its next cycle
	}
}

// takeResends runs the resends the appliers asked for, on the loop.
func (e *Engine) takeResends() {
	e.rmu.Lock()
	if len(e.resends) == 0 {
		e.rmu.Unlock()
		return
	}
	req := e.resends
	e.resends = map[uint64]bool{}
	e.rmu.Unlock()
	for id, force := range req {
		if g := e.groups[id]; g != nil {
			e.resendOn(g, force)
		}
	}
}

// resendOn proposes again, in order, what this member sent to g and has
// not seen applied, or marks g to do so once it knows a leader. A copy
// that commits too is skipped by every replica's applier.
func (e *Engine) resendOn(g *group, force bool) {
	next := g.app.mine.Load()
	i := 0
	for i < len(g.sent) && g.sent[i].gseq < next {
		i++
	}
	g.sent = slices.Delete(g.sent, 0, i)
	if len(g.sent) == 0 {
		g.resend = false
		return
	}
	now := time.Now()
	if !force && !g.resend && next == g.resentFrom && now.Sub(g.resentAt) < e.cfg.TickInterval*time.Duration(e.cfg.HeartbeatTicks) {
		return
	}
	e.wake(g)
	e.dirty[g.id] = g
	st := g.rn.BasicStatus()
	if st.Lead == 0 {
		g.resend = true
		return
	}
	g.resend, g.resentAt, g.resentFrom = false, now, next
	term := st.HardState.GetTerm()
	for _, p := range g.sent {
		e.pmu.Lock()
		if w := e.pending[p.seq]; w != nil {
			w.term = term
		}
		e.pmu.Unlock()
		if err := p.prop(g, p.env); err != nil {
			g.resend = true // dropped (a leader transferring): again with the next leader
			return
		}
	}
}

// failOlder handles this member's proposals to group id made in a term
// before term: the group applied an entry of term without applying them,
// so a leader change may have lost them (or they arrive late and may
// still commit). A Propose's are proposed again (the applier skips a
// copy); a configuration change fails with ErrLeaderChanged.
func (e *Engine) failOlder(id, term uint64) {
	e.pmu.Lock()
	resend := false
	for seq, w := range e.pending {
		if w.group != id || w.term == 0 || w.term >= term {
			continue
		}
		if w.normal {
			resend = true
			continue
		}
		w.ch <- result{err: ErrLeaderChanged}
		delete(e.pending, seq)
	}
	e.pmu.Unlock()
	if resend {
		e.requestResend(id, true)
	}
}

// answer hands r to this member's proposal seq, if it still waits.
func (e *Engine) answer(seq uint64, r result) {
	e.pmu.Lock()
	w := e.pending[seq]
	delete(e.pending, seq)
	e.pmu.Unlock()
	if w != nil {
		w.ch <- r
	}
}

// Status is one group's raft state on this member.
type Status struct {
	Leader   uint64
	Term     uint64
	Commit   uint64
	IsLeader bool
	Quiesced bool
	Voters   []uint64
	Learners []uint64
}

// Status returns group id's state on this member.
func (e *Engine) Status(ctx context.Context, id uint64) (Status, error) {
	var s Status
	var err error
	if derr := e.do(ctx, func() {
		g := e.groups[id]
		if g == nil {
			err = ErrNoGroup
			return
		}
		st := g.rn.BasicStatus()
		s = Status{
			Leader: st.Lead, Term: st.HardState.GetTerm(), Commit: st.HardState.GetCommit(),
			IsLeader: st.RaftState == raft.StateLeader, Quiesced: g.quiesced,
			Voters: slices.Clone(g.conf.GetVoters()), Learners: slices.Clone(g.conf.GetLearners()),
		}
	}); derr != nil {
		return s, derr
	}
	return s, err
}

// Groups returns the ids of the groups on this member.
func (e *Engine) Groups(ctx context.Context) ([]uint64, error) {
	var ids []uint64
	err := e.do(ctx, func() {
		for id := range e.groups {
			ids = append(ids, id)
		}
	})
	slices.Sort(ids)
	return ids, err
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{
		Groups: int(e.nGroups.Load()), Active: int(e.nActive.Load()),
		Syncs: e.syncs.Load(), ReadyGroups: e.readies.Load(), Snapshots: e.snapshots.Load(),
		SnapshotsSent: e.snapsSent.Load(), Dropped: e.dropped.Load(), Woken: e.woken.Load(),
		Applied: e.applied.Load(), Restores: e.restores.Load(),
	}
}

// Campaign makes this member stand for election in group id now, rather
// than after an election timeout (a leader locator's choice at creation).
func (e *Engine) Campaign(ctx context.Context, id uint64) error {
	var err error
	if derr := e.do(ctx, func() {
		g := e.groups[id]
		if g == nil {
			err = ErrNoGroup
			return
		}
		e.wake(g)
		err = g.rn.Campaign()
		e.dirty[id] = g
	}); derr != nil {
		return derr
	}
	return err
}

// TransferLeader asks group id's leader, which must be this member, to
// hand leadership to member (leader locators, rebalancing). It returns
// once asked; the transfer completes, or is abandoned, within an election
// timeout.
func (e *Engine) TransferLeader(ctx context.Context, id, member uint64) error {
	var err error
	if derr := e.do(ctx, func() {
		g := e.groups[id]
		switch {
		case g == nil:
			err = ErrNoGroup
		case g.rn.BasicStatus().RaftState != raft.StateLeader:
			err = ErrNotLeader
		default:
			e.wake(g)
			g.rn.TransferLeader(member)
			e.dirty[id] = g
		}
	}); derr != nil {
		return derr
	}
	return err
}

// wake makes a quiesced group tick again.
func (e *Engine) wake(g *group) {
	if g.quiesced {
		g.quiesced = false
		e.active[g.id] = g
		e.woken.Add(1)
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

// discardLogger keeps etcd raft's per-group lines out of the log (with
// thousands of groups they would drown it); its panics still panic.
type discardLogger struct{}

func (discardLogger) Debug(...any)              {}
func (discardLogger) Debugf(string, ...any)     {}
func (discardLogger) Error(...any)              {}
func (discardLogger) Errorf(string, ...any)     {}
func (discardLogger) Info(...any)               {}
func (discardLogger) Infof(string, ...any)      {}
func (discardLogger) Warning(...any)            {}
func (discardLogger) Warningf(string, ...any)   {}
func (discardLogger) Fatal(v ...any)            { panic(fmt.Sprint(v...)) }
func (discardLogger) Fatalf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
func (discardLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (discardLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
