package multiraft

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Engine runs every raft group of one member. One goroutine, the loop,
// owns every group's raft state, the state machines and the database; the
// transport's goroutines (one per peer, one reader per connection, one
// accepting) only move frames.
type Engine struct {
	cfg   Config
	store *store
	hs    handshaker
	peers map[uint64]*peer

	inbox chan inbound
	ops   chan func()
	stop  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	// Owned by the loop.
	groups       map[uint64]*group
	active       map[uint64]*group // ticked: not quiesced
	dirty        map[uint64]*group // stepped, ticked or proposed to since the last ready cycle
	seq          uint64            // the last proposal's number
	snapsOut     int               // snapshots being sent
	alive        map[uint64]bool   // peers heard within an election timeout
	outMsgs      map[uint64][]groupMsg
	outBeats     map[uint64][]beat
	stats        Stats
	electionSpan time.Duration
}

// group is one raft group on this member.
type group struct {
	id        uint64
	rn        *raft.RawNode
	mem       *raft.MemoryStorage
	sm        StateMachine
	conf      raftpb.ConfState
	quiesced  bool
	applied   uint64
	snapIndex uint64
	waiters   map[uint64]chan result // proposals of this member by number
}

type result struct {
	value []byte
	err   error
}

// inbound is what a reader received from a peer.
type inbound struct {
	from  uint64
	msgs  []groupMsg
	beats []beat
}

// Stats counts what the engine did, for tests and metrics.
type Stats struct {
	Groups        int    // groups on this member
	Active        int    // groups not quiesced
	Syncs         uint64 // database syncs (one per ready cycle that wrote)
	ReadyGroups   uint64 // group readies handled, over all cycles
	Snapshots     uint64 // snapshots taken of state machines
	SnapshotsSent uint64
	Dropped       uint64 // messages dropped: unknown group, invalid, queue full
}

// New opens the member's database, restarts every group it holds (each
// restored from its snapshot and replaying its log) and starts the
// transport and the loop.
func New(c Config) (*Engine, error) {
	cfg, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := openStore(cfg.Dir)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg:          cfg,
		store:        st,
		hs:           handshaker{self: cfg.ID, secret: cfg.Secret, rand: rand.Reader},
		peers:        map[uint64]*peer{},
		inbox:        make(chan inbound, 256),
		ops:          make(chan func(), 256),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
		groups:       map[uint64]*group{},
		active:       map[uint64]*group{},
		dirty:        map[uint64]*group{},
		alive:        map[uint64]bool{},
		outMsgs:      map[uint64][]groupMsg{},
		outBeats:     map[uint64][]beat{},
		electionSpan: cfg.TickInterval * time.Duration(cfg.ElectionTicks),
	}
	ids, err := st.groups()
	if err != nil {
		_ = st.close()
		return nil, err
	}
	for _, id := range ids {
		if err := e.restartGroup(id); err != nil {
			_ = st.close()
			return nil, err
		}
	}
	for id, addr := range cfg.Peers {
		p := newPeer(e, id, addr)
		e.peers[id] = p
		e.alive[id] = true // until an election timeout passes without a frame
	}
	for _, p := range e.peers {
		e.wg.Add(1)
		go p.run()
	}
	e.wg.Add(1)
	go e.accept()
	go e.loop()
	return e, nil
}

// Close stops the loop and the transport, fails what waits and closes the
// database.
func (e *Engine) Close() error {
	var err error
	e.once.Do(func() {
		close(e.stop)
		<-e.done
		_ = e.cfg.Listener.Close()
		e.wg.Wait()
		for _, g := range e.groups {
			g.fail(ErrClosed)
		}
		err = e.store.close()
	})
	return err
}

func (e *Engine) raftConfig(g *group) *raft.Config {
	return &raft.Config{
		ID:                        e.cfg.ID,
		ElectionTick:              e.cfg.ElectionTicks,
		HeartbeatTick:             e.cfg.HeartbeatTicks,
		Storage:                   g.mem,
		Applied:                   g.applied,
		MaxSizePerMsg:             maxSizePerMsg,
		MaxInflightMsgs:           maxInflightMsgs,
		MaxCommittedSizePerReady:  maxCommittedPerReady,
		MaxUncommittedEntriesSize: maxUncommittedBytes,
		// As meta/raft: CheckQuorum makes a leader cut off from a majority
		// step down, so a minority commits nothing; PreVote keeps a member
		// coming back from deposing a healthy leader.
		CheckQuorum: true,
		PreVote:     true,
		Logger:      discardRaftLogger,
	}
}

// restartGroup rebuilds group id from the database: its snapshot into a
// fresh state machine, its entries into raft's storage; raft then hands
// the committed entries after the snapshot back for applying.
func (e *Engine) restartGroup(id uint64) error {
	l, err := e.store.load(id)
	if err != nil {
		return err
	}
	g := &group{id: id, mem: raft.NewMemoryStorage(), sm: e.cfg.NewStateMachine(id)}
	if !raft.IsEmptySnap(l.snap) {
		if err := g.mem.ApplySnapshot(l.snap); err != nil {
			return fmt.Errorf("multiraft: group %d: %w", id, err)
		}
		if len(l.snap.Data) > 0 {
			if err := g.sm.Restore(l.snap.Data); err != nil {
				return fmt.Errorf("multiraft: group %d: restore its snapshot: %w", id, err)
			}
		}
		g.conf = l.snap.Metadata.ConfState
		g.applied, g.snapIndex = l.snap.Metadata.Index, l.snap.Metadata.Index
	}
	if err := g.mem.Append(l.ents); err != nil {
		return fmt.Errorf("multiraft: group %d: %w", id, err)
	}
	if !raft.IsEmptyHardState(l.hs) {
		if err := g.mem.SetHardState(l.hs); err != nil {
			return fmt.Errorf("multiraft: group %d: %w", id, err)
		}
	}
	rn, err := raft.NewRawNode(e.raftConfig(g))
	if err != nil {
		return fmt.Errorf("multiraft: group %d: %w", id, err)
	}
	g.rn = rn
	e.groups[id] = g
	e.active[id] = g
	e.dirty[id] = g
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
// group whose initial members are voters (every one of them calls
// CreateGroup with the same list); without, this member joins an existing
// group and waits for its leader's AddReplica to reach it.
func (e *Engine) CreateGroup(ctx context.Context, id uint64, voters []uint64) error {
	if err := checkGroupID(id); err != nil {
		return err
	}
	var err error
	if derr := e.do(ctx, func() { err = e.createGroup(id, voters) }); derr != nil {
		return derr
	}
	return err
}

func (e *Engine) createGroup(id uint64, voters []uint64) error {
	if e.groups[id] != nil {
		return ErrGroupExists
	}
	g := &group{id: id, mem: raft.NewMemoryStorage(), sm: e.cfg.NewStateMachine(id)}
	b := e.store.newBatch()
	b.createGroup(id)
	if len(voters) > 0 {
		// Every initial member starts from the same snapshot at index 1
		// holding the configuration, so there is nothing to replay and a
		// member added later catches up from the leader's log or snapshot.
		vs := append([]uint64(nil), voters...)
		sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
		snap := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1, Term: 1, ConfState: raftpb.ConfState{Voters: vs}}}
		if err := b.setSnapshot(id, snap); err != nil {
			return err
		}
		if err := g.mem.ApplySnapshot(snap); err != nil {
			return err
		}
		g.conf = snap.Metadata.ConfState
		g.applied, g.snapIndex = 1, 1
	}
	if err := b.commit(); err != nil {
		return fmt.Errorf("multiraft: create group %d: %w", id, err)
	}
	rn, err := raft.NewRawNode(e.raftConfig(g))
	if err != nil {
		return fmt.Errorf("multiraft: group %d: %w", id, err)
	}
	g.rn = rn
	e.groups[id] = g
	e.active[id] = g
	e.dirty[id] = g
	return nil
}

// RemoveGroup deletes group id from this member: its raft state, its log
// and its state machine. What waits on it fails with ErrGroupRemoved. The
// other members keep their replicas (RemoveReplica first, to shrink the
// group rather than lose a replica).
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
			return
		}
		if err = b.commit(); err != nil {
			return
		}
		delete(e.groups, id)
		delete(e.active, id)
		delete(e.dirty, id)
		g.fail(ErrGroupRemoved)
	}); derr != nil {
		return derr
	}
	return err
}

// Propose replicates command in group id and returns what the group's
// state machine on this member returned when it applied it. It works on
// any replica (raft forwards to the leader). An error other than the
// context's means the command was not committed; the context's means it
// may or may not be.
func (e *Engine) Propose(ctx context.Context, id uint64, command []byte) ([]byte, error) {
	return e.propose(ctx, id, func(g *group, env []byte) error {
		return g.rn.Propose(append(env, command...))
	})
}

// AddReplica adds member as a voter of group id (a raft conf change). The
// member must have created the group without voters first.
func (e *Engine) AddReplica(ctx context.Context, id, member uint64) error {
	return e.confChange(ctx, id, raftpb.ConfChangeAddNode, member)
}

// AddLearner adds member as a non-voting replica of group id, which a
// later AddReplica promotes once it caught up.
func (e *Engine) AddLearner(ctx context.Context, id, member uint64) error {
	return e.confChange(ctx, id, raftpb.ConfChangeAddLearnerNode, member)
}

// RemoveReplica removes member from group id's configuration. The removed
// member keeps its copy until its RemoveGroup.
func (e *Engine) RemoveReplica(ctx context.Context, id, member uint64) error {
	return e.confChange(ctx, id, raftpb.ConfChangeRemoveNode, member)
}

func (e *Engine) confChange(ctx context.Context, id uint64, t raftpb.ConfChangeType, member uint64) error {
	if member == 0 {
		return fmt.Errorf("multiraft: member id 0")
	}
	_, err := e.propose(ctx, id, func(g *group, env []byte) error {
		return g.rn.ProposeConfChange(raftpb.ConfChange{Type: t, NodeID: member, Context: env})
	})
	return err
}

// propose registers a waiter under a fresh number and proposes, on the
// loop; then waits for the entry to be applied here.
func (e *Engine) propose(ctx context.Context, id uint64, prop func(*group, []byte) error) ([]byte, error) {
	ch := make(chan result, 1)
	var seq uint64
	var err error
	if derr := e.do(ctx, func() {
		g := e.groups[id]
		switch {
		case g == nil:
			err = ErrNoGroup
			return
		case len(g.waiters) >= e.cfg.MaxPendingProposals:
			err = ErrBusy
			return
		}
		e.seq++
		seq = e.seq
		env := binary.AppendUvarint(binary.AppendUvarint(make([]byte, 0, 20), e.cfg.ID), seq)
		e.wake(g)
		if err = prop(g, env); err != nil {
			if err == raft.ErrProposalDropped {
				err = ErrNoLeader
			}
			return
		}
		if g.waiters == nil {
			g.waiters = map[uint64]chan result{}
		}
		g.waiters[seq] = ch
		e.dirty[id] = g
	}); derr != nil {
		return nil, derr
	}
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.value, r.err
	case <-ctx.Done():
		_ = e.do(context.Background(), func() {
			if g := e.groups[id]; g != nil {
				delete(g.waiters, seq)
			}
		})
		return nil, ctx.Err()
	case <-e.stop:
		return nil, ErrClosed
	}
}

// Status is one group's raft state on this member.
type Status struct {
	Leader   uint64
	Term     uint64
	Commit   uint64
	Applied  uint64
	IsLeader bool
	Quiesced bool
	Voters   []uint64
	Learners []uint64
}

// Status returns group id's state.
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
			Leader: st.Lead, Term: st.Term, Commit: st.Commit, Applied: g.applied,
			IsLeader: st.RaftState == raft.StateLeader, Quiesced: g.quiesced,
			Voters: append([]uint64(nil), g.conf.Voters...), Learners: append([]uint64(nil), g.conf.Learners...),
		}
	}); derr != nil {
		return s, derr
	}
	return s, err
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	var s Stats
	_ = e.do(context.Background(), func() {
		s = e.stats
		s.Groups, s.Active = len(e.groups), len(e.active)
	})
	return s
}

// TransferLeader asks group id's leader, which must be this member, to
// hand leadership to member (for leader locators and rebalancing).
func (e *Engine) TransferLeader(ctx context.Context, id, member uint64) error {
	var err error
	if derr := e.do(ctx, func() {
		g := e.groups[id]
		switch {
		case g == nil:
			err = ErrNoGroup
		case g.rn.BasicStatus().RaftState != raft.StateLeader:
			err = fmt.Errorf("multiraft: group %d is not led by this member", id)
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

func (g *group) fail(err error) {
	for seq, ch := range g.waiters {
		ch <- result{err: err}
		delete(g.waiters, seq)
	}
}

// wake makes a quiesced group tick again.
func (e *Engine) wake(g *group) {
	if g.quiesced {
		g.quiesced = false
		e.active[g.id] = g
	}
}
