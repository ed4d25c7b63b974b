package raft

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/meta"

	"github.com/warrenmq/broker/internal/raftlink"
)

var (
	// ErrStopped is returned by calls on a Node that is stopped or stopping.
	ErrStopped = errors.New("raft: node stopped")
	// ErrLeaderChanged is returned by a write that was waiting when the
	// node saw the leader it knew go away. The write may still be applied
	// (a new leader can commit it); the caller must treat the outcome as
	// unknown, exactly like a timeout.
	ErrLeaderChanged = errors.New("raft: leader changed, outcome unknown")
	// ErrStateReplaced is returned by a write that was waiting when the
	// node replaced its state with a snapshot from the leader; the outcome
	// is unknown.
	ErrStateReplaced = errors.New("raft: state replaced by a snapshot, outcome unknown")
	// ErrNotProposed is returned by a write that this node could not
	// forward to the leader (its queue to the leader was full): it was
	// not stored, and may be retried.
	ErrNotProposed = errors.New("raft: write not forwarded to the leader, not stored")
	// ErrProposalLost is returned by a write that was forwarded to the
	// leader but may have been lost on the way (the connection failed) or
	// dropped by the leader, or that was not applied within
	// Config.ProposalTimeout: raft does not report such losses, so without
	// this the write would wait forever. The outcome is unknown.
	ErrProposalLost = errors.New("raft: write lost or not applied in time, outcome unknown")
	// ErrDataFormat is returned by Start for a data directory written in an
	// on-disk format this version does not read: one written before records
	// and unacked entries took internal/codec's versioned encodings (the
	// single-node layout), or by a later version. Nothing in it is changed;
	// start the member on an empty directory and let it catch up from the
	// cluster, or start a new cluster.
	ErrDataFormat = errors.New("raft: data directory in an on-disk format this version does not read")
)

// Raft's flow control, per follower. A message of appends carries at most
// maxSizePerMsg of entries (one larger entry goes alone); at most
// maxInflightMsgs such messages, and maxInflightBytes, are unacknowledged
// at a time, so a follower that comes back from a pause is sent its
// backlog a window at a time, at the pace it acknowledges, instead of
// everything at once. A Ready hands the Ready loop at most
// maxCommittedPerReady of committed entries to apply, so a node catching
// up keeps ticking and answering heartbeats between batches. The leader
// refuses proposals past maxUncommittedBytes of uncommitted entries
// (ErrProposalDropped): only a leader that lost its quorum gets there.
const (
	maxSizePerMsg        = 256 << 10
	maxInflightMsgs      = 64
	maxInflightBytes     = 4 << 20
	maxCommittedPerReady = 4 << 20
	maxUncommittedBytes  = 64 << 20
)

// Node is one member of the raft group. It implements meta.Store; Shards
// and Unacked return the storage.ShardStore and unacked.Index views on the
// same group. Create it with Start; the caller that started it stops it.
// Its entities are meta.Typed's, on the state machine's 'm' keys.
type Node struct {
	*meta.Typed
	cfg   Config
	raft  etcdraft.Node
	mem   *etcdraft.MemoryStorage
	log   *logStore
	state *pebble.DB

	stopc      chan struct{}
	stopCtx    context.Context
	stopCancel context.CancelFunc
	stopOnce   sync.Once
	closeOnce  sync.Once
	closeErr   error
	wg         sync.WaitGroup
	fatal      atomic.Pointer[error]
	// gate keeps readers of the state DB out while Stop closes it.
	gate struct {
		sync.RWMutex
		closed bool
	}

	lead    atomic.Uint64
	leadMu  sync.Mutex
	leadCh  chan struct{} // closed and replaced when lead changes
	reqBase uint64
	reqSeq  atomic.Uint64
	propc   chan *proposal
	// forwarded holds proposals forwarded by other members for
	// stepProposals.
	forwarded chan *raftpb.Message
	waits     struct {
		sync.Mutex
		m map[uint64]*proposal
	}
	reads struct {
		sync.Mutex
		pending *readReq
	}
	readc      chan struct{}
	readStates chan etcdraft.ReadState
	// watch holds the Watch registrations. The Ready loop holds it while
	// it applies a batch (from taking the list to committing), so Watch
	// and cancel wait for a batch in progress; it is released before the
	// batch's changes are delivered, so fn may call cancel.
	watch struct {
		sync.Mutex
		list []*watcher // copy on write
	}
	applied struct {
		sync.Mutex
		index uint64
		ch    chan struct{} // closed and replaced when index grows
	}

	// refused logs the incoming messages checkMessage refuses.
	refused raftlink.RateLog

	// queues holds each peer's outgoing queue (sender.go).
	queues struct {
		sync.Mutex
		m map[uint64]*peerQueue
	}

	// Owned by the Ready loop (and by Start before it runs).
	appliedIndex uint64
	snapIndex    uint64
	prevHS       *raftpb.HardState
	confState    *raftpb.ConfState
}

// proposal is one caller's write waiting to be proposed and applied.
type proposal struct {
	id   uint64
	data []byte // the encoded command; nil for a conf change
	done chan result
	// resolved flips once, when the result is delivered or the caller gave
	// up; the proposer skips a proposal that is already resolved.
	resolved atomic.Bool
	// proposedAt is when it was handed to raft (UnixNano), 0 before.
	proposedAt atomic.Int64
}

type readReq struct {
	done chan struct{}
	err  error
}

// Start opens (or creates) the node's data under cfg.Dir and starts it:
// a Ready loop, a proposer, a linearizable-read loop and a receiver
// goroutine. Stop stops them.
func Start(cfg Config) (*Node, error) {
	cfg.Peers = append([]Peer(nil), cfg.Peers...)
	cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for d, fs := range map[string]vfs.FS{"log": cfg.faults.logFS, "state": cfg.faults.stateFS} {
		if fs == nil {
			fs = vfs.Default
		}
		if err := makeDir(fs, filepath.Join(cfg.Dir, d)); err != nil {
			return nil, err
		}
	}
	n := &Node{
		cfg:        cfg,
		stopc:      make(chan struct{}),
		leadCh:     make(chan struct{}),
		reqBase:    rand.Uint64() &^ (1<<32 - 1),
		propc:      make(chan *proposal, 1024),
		forwarded:  make(chan *raftpb.Message, 1024),
		readc:      make(chan struct{}, 1),
		readStates: make(chan etcdraft.ReadState, 64),
		confState:  &raftpb.ConfState{},
	}
	n.Typed = meta.NewTyped(kv{n})
	n.stopCtx, n.stopCancel = context.WithCancel(context.Background())
	n.waits.m = map[uint64]*proposal{}
	n.queues.m = map[uint64]*peerQueue{}
	n.applied.ch = make(chan struct{})
	if err := n.open(); err != nil {
		n.closeStores()
		return nil, err
	}
	n.wg.Add(5)
	go func() { defer n.wg.Done(); n.run() }()
	go func() { defer n.wg.Done(); n.propose() }()
	go func() { defer n.wg.Done(); n.readLoop() }()
	go func() { defer n.wg.Done(); n.receive() }()
	go func() { defer n.wg.Done(); n.stepProposals() }()
	return n, nil
}

// makeDir creates dir and syncs the directories above it (Dir and its
// parent), so that a crash right after a first start cannot lose the
// directory entries of the DBs, whose own files Pebble syncs.
func makeDir(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("raft: create data dir: %w", err)
	}
	for i, d := 0, filepath.Dir(dir); i < 2; i, d = i+1, filepath.Dir(d) {
		f, err := fs.OpenDir(d)
		if err != nil {
			return fmt.Errorf("raft: sync data dir: %w", err)
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("raft: sync data dir: %w", err)
		}
	}
	return nil
}

// open loads the raft log and the state machine and creates the raft node.
func (n *Node) open() error {
	var err error
	n.log, err = openLogStore(filepath.Join(n.cfg.Dir, "log"), pebbleOptions(n.cfg.faults.logFS))
	if err != nil {
		return err
	}
	n.state, err = pebble.Open(filepath.Join(n.cfg.Dir, "state"), pebbleOptions(n.cfg.faults.stateFS))
	if err != nil {
		return fmt.Errorf("raft: open state: %w", err)
	}
	snap, hs, ents, err := n.log.load()
	if err != nil {
		return err
	}
	if err := checkStored(n.cfg.Dir, hs, ents, snap); err != nil {
		return err
	}
	if err := n.loadApplied(); err != nil {
		return err
	}
	// The state DB is written without sync: after a crash it may be behind
	// the latest snapshot, whose entries are gone from the log. The snapshot
	// then is the state.
	if snap != nil && snap.GetMetadata().GetIndex() > n.appliedIndex {
		if err := n.restore(snap); err != nil {
			return err
		}
	}
	if snap != nil {
		n.snapIndex = snap.GetMetadata().GetIndex()
	}
	if hs, err = n.recoverCommit(hs, ents); err != nil {
		return err
	}
	n.mem = etcdraft.NewMemoryStorage()
	if snap != nil {
		if err := n.mem.ApplySnapshot(snap); err != nil {
			return fmt.Errorf("raft: load snapshot: %w", err)
		}
	}
	if hs != nil {
		if err := n.mem.SetHardState(hs); err != nil {
			return fmt.Errorf("raft: load hard state: %w", err)
		}
		n.prevHS = hs
	}
	if err := n.mem.Append(ents); err != nil {
		return fmt.Errorf("raft: load log: %w", err)
	}
	n.publishApplied(n.appliedIndex)
	peers, err := n.storedPeers(n.state)
	if err != nil {
		return err
	}
	if ps, ok := n.cfg.Transport.(PeerSetter); ok {
		for _, p := range append(append([]Peer(nil), n.cfg.Peers...), peers...) {
			if p.ID != n.cfg.ID {
				ps.SetPeer(p.ID, p.RaftAddr)
			}
		}
	}
	rc := &etcdraft.Config{
		ID:                        n.cfg.ID,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		Storage:                   initialConf{n.mem, n.confState},
		Applied:                   n.appliedIndex,
		MaxSizePerMsg:             maxSizePerMsg,
		MaxInflightMsgs:           maxInflightMsgs,
		MaxInflightBytes:          maxInflightBytes,
		MaxCommittedSizePerReady:  maxCommittedPerReady,
		MaxUncommittedEntriesSize: maxUncommittedBytes,
		// CheckQuorum makes a leader cut off from a majority step down, so
		// a minority partition stops accepting writes; PreVote keeps a
		// rejoining node from deposing a healthy leader.
		CheckQuorum:    true,
		PreVote:        true,
		ReadOnlyOption: etcdraft.ReadOnlySafe,
		Logger:         raftLogger{l: n.cfg.Logger},
	}
	fresh := snap == nil && hs == nil && len(ents) == 0
	switch {
	case fresh && !n.cfg.Join:
		peers := make([]etcdraft.Peer, len(n.cfg.Peers))
		for i, p := range n.cfg.Peers {
			ctx, err := json.Marshal(p)
			if err != nil {
				return fmt.Errorf("raft: encode peer: %w", err)
			}
			peers[i] = etcdraft.Peer{ID: p.ID, Context: ctx}
		}
		n.raft = etcdraft.StartNode(rc, peers)
	default:
		n.raft = etcdraft.RestartNode(rc)
	}
	return nil
}

// recoverCommit returns hs with its commit index raised to the applied
// index when a crash left it behind.
//
// A HardState that only moved the commit index is written to the log DB
// without sync, and so is the applied index to the state DB; a crash can
// keep the second and lose the first. etcd raft requires applied <=
// committed <= last index at restart (RestartNode panics with "applied(x)
// is out of range [prevApplied(y), committed(z)]" otherwise). Raising
// Commit to the applied index restores what the lost write said, and is
// true: raft hands out an entry in CommittedEntries only once a quorum
// stored it, it never overwrites a committed entry (it panics instead),
// and this node synced every entry to the log DB before applying it, so
// the log holds exactly those committed entries up to the applied index.
// (Clamping Config.Applied down to Commit would also keep raft's
// invariant, raft would then hand the entries out again and apply would
// skip them, but it would tell raft less than this node knows.)
//
// An applied index past the end of the log cannot come from a crash (the
// log is synced before anything is applied): that is a corrupt or foreign
// directory, which it would be unsafe to serve from.
func (n *Node) recoverCommit(hs *raftpb.HardState, ents []*raftpb.Entry) (*raftpb.HardState, error) {
	last := n.snapIndex
	if k := len(ents); k > 0 {
		last = ents[k-1].GetIndex()
	}
	if n.appliedIndex > last {
		return nil, fmt.Errorf("raft: the state machine applied index %d but the log ends at %d: data directory %s is corrupt", n.appliedIndex, last, n.cfg.Dir)
	}
	commit := max(n.appliedIndex, n.snapIndex)
	if hs.GetCommit() >= commit {
		return hs, nil
	}
	if n.cfg.Logger != nil {
		n.cfg.Logger.Warn("raft: commit index lost in a crash, recovered from the applied index",
			"id", n.cfg.ID, "commit", hs.GetCommit(), "applied", n.appliedIndex)
	}
	raised := &raftpb.HardState{}
	if hs != nil {
		raised = proto.Clone(hs).(*raftpb.HardState)
	}
	raised.Commit = proto.Uint64(commit)
	return raised, nil
}

// crashPoint calls the crash tests' hook, if any.
func (n *Node) crashPoint(point string) {
	if n.cfg.faults.at != nil {
		n.cfg.faults.at(n, point)
	}
}

// initialConf hands raft the membership as of the applied index: raft
// does not replay entries up to Config.Applied, so the configuration
// changes among them must come from the state machine, which records the
// ConfState with every applied batch.
type initialConf struct {
	*etcdraft.MemoryStorage
	cs *raftpb.ConfState
}

func (s initialConf) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	hs, _, err := s.MemoryStorage.InitialState()
	return hs, proto.Clone(s.cs).(*raftpb.ConfState), err
}

// Stop stops the node's goroutines and closes its data. It is idempotent;
// calls waiting on the node return ErrStopped.
func (n *Node) Stop() error {
	n.signalStop()
	n.wg.Wait()
	n.closeOnce.Do(func() {
		if n.raft != nil {
			n.raft.Stop()
		}
		n.failPending(ErrStopped)
		n.gate.Lock()
		n.gate.closed = true
		n.gate.Unlock()
		n.closeErr = n.closeStores()
	})
	return n.closeErr
}

func (n *Node) signalStop() {
	n.stopOnce.Do(func() {
		close(n.stopc)
		n.stopCancel()
	})
}

func (n *Node) closeStores() error {
	var errs []error
	if n.state != nil {
		if err := n.state.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raft: close state: %w", err))
		}
	}
	if n.log != nil {
		if err := n.log.close(); err != nil {
			errs = append(errs, fmt.Errorf("raft: close log: %w", err))
		}
	}
	return errors.Join(errs...)
}

// stoppedErr is the error for calls after the node stopped: the fatal
// error that stopped it, if any.
func (n *Node) stoppedErr() error {
	if p := n.fatal.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrStopped, *p)
	}
	return ErrStopped
}

// ID returns the node's raft id.
func (n *Node) ID() uint64 { return n.cfg.ID }

// IsLeader reports whether this node is the raft leader, as of the last
// Ready it handled.
func (n *Node) IsLeader() bool { return n.lead.Load() == n.cfg.ID }

// Leader returns the id of the leader this node knows of, 0 for none.
func (n *Node) Leader() uint64 { return n.lead.Load() }

// LiveNodes returns, on the leader, the ids of the members it heard from
// within the last election timeout (raft's RecentActive, which CheckQuorum
// clears every election timeout), itself included, in ascending order. ok
// is false on any other node: only the leader tracks its followers. This is
// the node liveness the leader-only unacked scanner needs to tell a dead
// node's deliveries from those of a node that is merely quiet.
func (n *Node) LiveNodes() (ids []uint64, ok bool) {
	st := n.raft.Status()
	if st.RaftState != etcdraft.StateLeader {
		return nil, false
	}
	for id, pr := range st.Progress {
		if pr.RecentActive || id == n.cfg.ID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, true
}

// AppliedIndex returns the raft index this node has applied: with the
// leader's, a measure of how far behind it is.
func (n *Node) AppliedIndex() uint64 {
	n.applied.Lock()
	defer n.applied.Unlock()
	return n.applied.index
}

// WaitLeader waits until the node knows a leader and returns its id.
func (n *Node) WaitLeader(ctx context.Context) (uint64, error) {
	for {
		n.leadMu.Lock()
		ch := n.leadCh
		n.leadMu.Unlock()
		if l := n.lead.Load(); l != 0 {
			return l, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-n.stopc:
			return 0, n.stoppedErr()
		}
	}
}

// Campaign makes this node start an election now rather than after an
// election timeout: for tests, and to move leadership on purpose.
func (n *Node) Campaign(ctx context.Context) error {
	if err := n.raft.Campaign(ctx); err != nil {
		return fmt.Errorf("raft: campaign: %w", err)
	}
	return nil
}

// AddNode adds p to the cluster through a raft configuration change and
// returns once it is applied here. The new node is started with
// Config.Join and an empty Dir; it receives the state from the leader.
func (n *Node) AddNode(ctx context.Context, p Peer) error {
	if p.ID == 0 {
		return errors.New("raft: AddNode: peer id 0")
	}
	pc, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("raft: encode peer: %w", err)
	}
	return n.confChange(ctx, raftpb.ConfChangeAddNode, p.ID, pc)
}

// RemoveNode removes member id from the cluster through a raft
// configuration change and returns once it is applied here.
func (n *Node) RemoveNode(ctx context.Context, id uint64) error {
	if id == 0 {
		return errors.New("raft: RemoveNode: peer id 0")
	}
	return n.confChange(ctx, raftpb.ConfChangeRemoveNode, id, nil)
}

func (n *Node) confChange(ctx context.Context, typ raftpb.ConfChangeType, id uint64, pc []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := n.newProposal()
	cc := &raftpb.ConfChange{Type: typ.Enum(), NodeId: proto.Uint64(id), Context: pc, Id: proto.Uint64(p.id)}
	n.register(p)
	p.proposedAt.Store(time.Now().UnixNano())
	if err := n.raft.ProposeConfChange(ctx, cc); err != nil {
		n.forget(p)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("raft: propose configuration change: %w", err)
	}
	_, err := n.wait(ctx, p)
	return err
}

// Peers returns the current members, linearizably.
func (n *Node) Peers(ctx context.Context) ([]Peer, error) {
	var peers []Peer
	err := n.read(ctx, func(db *pebble.DB) error {
		var err error
		peers, err = n.storedPeers(db)
		return err
	})
	return peers, err
}

func (n *Node) storedPeers(r pebble.Reader) ([]Peer, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefixPeer, UpperBound: codec.Successor(prefixPeer)})
	if err != nil {
		return nil, fmt.Errorf("raft: list peers: %w", err)
	}
	defer it.Close()
	out := []Peer{}
	for ok := it.First(); ok; ok = it.Next() {
		var p Peer
		if err := json.Unmarshal(it.Value(), &p); err != nil {
			return nil, fmt.Errorf("raft: corrupt peer %x: %w", it.Key(), err)
		}
		out = append(out, p)
	}
	return out, it.Error()
}

// --- writes -----------------------------------------------------------

// propose is the proposer goroutine: it packs every command waiting in
// propc, up to MaxBatchBytes, into one entry, so many concurrent writers
// cost one raft proposal and one fsync per node.
func (n *Node) propose() {
	var batch []*proposal
	for {
		batch = batch[:0]
		select {
		case p := <-n.propc:
			batch = append(batch, p)
		case <-n.stopc:
			return
		}
		size := len(batch[0].data)
	gather:
		for size < n.cfg.MaxBatchBytes {
			select {
			case p := <-n.propc:
				batch = append(batch, p)
				size += len(p.data)
			default:
				break gather
			}
		}
		// Encode only once there is a leader to propose to: a write whose
		// caller gave up while the node had no leader (a minority
		// partition) must not be proposed later, after the partition
		// heals, when nobody waits for it.
		if _, err := n.WaitLeader(n.stopCtx); err != nil {
			return
		}
		live := 0
		for _, p := range batch {
			if !p.resolved.Load() {
				live++
			}
		}
		if live == 0 {
			continue
		}
		now := time.Now().UnixNano()
		for _, p := range batch {
			p.proposedAt.Store(now)
		}
		data := make([]byte, 0, size+1+binary.MaxVarintLen64)
		data = append(data, entryVersion)
		data = binary.AppendUvarint(data, uint64(live))
		for _, p := range batch {
			if !p.resolved.Load() {
				data = append(data, p.data...)
			}
		}
		// Propose blocks while there is no leader; a caller that gives up
		// meanwhile has already returned.
		if err := n.raft.Propose(n.stopCtx, data); err != nil {
			if n.stopCtx.Err() != nil {
				return
			}
			for _, p := range batch {
				n.resolve(p.id, result{err: fmt.Errorf("raft: propose: %w", err)})
			}
		}
	}
}

// --- reads ------------------------------------------------------------

// linearize returns once this node has applied everything committed
// before the call: raft's ReadIndex, so a read after it sees every write
// acknowledged anywhere before the read began. Concurrent callers share
// one ReadIndex round.
func (n *Node) linearize(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.reads.Lock()
	r := n.reads.pending
	if r == nil {
		r = &readReq{done: make(chan struct{})}
		n.reads.pending = r
	}
	n.reads.Unlock()
	select {
	case n.readc <- struct{}{}:
	default:
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopc:
		return n.stoppedErr()
	}
}

// readLoop serves linearize: it takes the waiting callers as one group
// (so each group's ReadIndex is issued after all its callers arrived),
// asks raft for the read index, waits until it is applied, and releases
// the group.
func (n *Node) readLoop() {
	for {
		select {
		case <-n.readc:
		case <-n.stopc:
			return
		}
		n.reads.Lock()
		r := n.reads.pending
		n.reads.pending = nil
		n.reads.Unlock()
		if r == nil {
			continue
		}
		idx, err := n.readIndex()
		if err == nil {
			err = n.waitApplied(idx)
		}
		r.err = err
		close(r.done)
	}
}

func (n *Node) readIndex() (uint64, error) {
	rctx := binary.BigEndian.AppendUint64(nil, n.newProposal().id)
	// Raft drops a read index request silently when there is no leader or
	// the message is lost; ask again after an election timeout.
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-retry.C:
			if err := n.raft.ReadIndex(n.stopCtx, rctx); err != nil {
				return 0, n.stoppedErr()
			}
			retry.Reset(time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval)
		case rs := <-n.readStates:
			if bytes.Equal(rs.RequestCtx, rctx) {
				return rs.Index, nil
			}
		case <-n.stopc:
			return 0, n.stoppedErr()
		}
	}
}

func (n *Node) waitApplied(idx uint64) error {
	for {
		n.applied.Lock()
		cur, ch := n.applied.index, n.applied.ch
		n.applied.Unlock()
		if cur >= idx {
			return nil
		}
		select {
		case <-ch:
		case <-n.stopc:
			return n.stoppedErr()
		}
	}
}

func (n *Node) publishApplied(idx uint64) {
	n.applied.Lock()
	if idx > n.applied.index {
		n.applied.index = idx
		close(n.applied.ch)
		n.applied.ch = make(chan struct{})
	}
	n.applied.Unlock()
}

// --- the Ready loop ---------------------------------------------------

// receive steps incoming messages into raft, those checkMessage passes
// (the rest are dropped and logged: raft trusts what it steps, and a
// forged term panics it). Proposals forwarded by other members go to
// stepProposals instead: raft takes a proposal only once it knows a
// leader, so stepping one here, while this node knows none (say a leader
// resumed after a pause, deposed, with its old followers' writes in its
// inbox), would wait for a leader whose messages are queued behind it,
// forever.
func (n *Node) receive() {
	in := n.cfg.Transport.Receive()
	for {
		select {
		case m := <-in:
			if err := raftlink.CheckMessage(m, n.cfg.ID); err != nil {
				n.refused.Warn(n.cfg.Logger, "raft: refused a message", "id", n.cfg.ID, "from", m.GetFrom(), "err", err)
				continue
			}
			if m.GetType() == raftpb.MsgProp {
				select {
				case n.forwarded <- m:
				default:
					// Dropped: the proposing member fails its writes
					// after Config.ProposalTimeout.
				}
				continue
			}
			// Errors mean the node stopped or the message was for
			// someone else; raft recovers from lost messages either way.
			_ = n.raft.Step(n.stopCtx, m)
		case <-n.stopc:
			return
		}
	}
}

// stepProposals steps the proposals other members forwarded to this node,
// waiting while it knows no leader; raft forwards them on to the leader.
func (n *Node) stepProposals() {
	for {
		select {
		case m := <-n.forwarded:
			_ = n.raft.Step(n.stopCtx, m)
		case <-n.stopc:
			return
		}
	}
}

func (n *Node) run() {
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	ticks := 0
	for {
		select {
		case now := <-ticker.C:
			n.raft.Tick()
			if ticks++; ticks%n.cfg.ElectionTicks == 0 {
				n.expireProposals(now)
			}
		case rd := <-n.raft.Ready():
			if err := n.handleReady(rd); err != nil {
				n.fatal.Store(&err)
				if n.cfg.Logger != nil {
					n.cfg.Logger.Error("raft: node stops", "id", n.cfg.ID, "err", err)
				}
				n.signalStop()
				return
			}
			n.raft.Advance()
		case <-n.stopc:
			return
		}
	}
}

// expireProposals fails with ErrProposalLost the writes handed to raft
// more than Config.ProposalTimeout ago and still not applied. Raft gives
// no word of a proposal it forwarded to the leader and that was lost on the
// way or dropped there; the leader change that fails every other lost
// write (setLead) may never come, and a caller without a deadline would
// wait forever.
func (n *Node) expireProposals(now time.Time) {
	limit := now.Add(-n.cfg.ProposalTimeout).UnixNano()
	var expired []*proposal
	n.waits.Lock()
	for id, p := range n.waits.m {
		if at := p.proposedAt.Load(); at != 0 && at < limit {
			expired = append(expired, p)
			delete(n.waits.m, id)
		}
	}
	n.waits.Unlock()
	for _, p := range expired {
		if p.resolved.CompareAndSwap(false, true) {
			p.done <- result{err: ErrProposalLost}
		}
	}
	if len(expired) > 0 && n.cfg.Logger != nil {
		n.cfg.Logger.Warn("raft: writes not applied in time, outcome unknown", "id", n.cfg.ID, "writes", len(expired), "timeout", n.cfg.ProposalTimeout)
	}
}

// handleReady does what raft asks, in the order it requires: persist
// (synced) before sending, so a vote or an acknowledged entry is on disk
// before anyone counts it; then apply what is committed.
func (n *Node) handleReady(rd etcdraft.Ready) error {
	if rd.SoftState != nil {
		n.setLead(rd.SoftState.Lead)
	}
	var snap *raftpb.Snapshot
	if !etcdraft.IsEmptySnap(rd.Snapshot) {
		snap = rd.Snapshot
	}
	var hs *raftpb.HardState
	if !etcdraft.IsEmptyHardState(rd.HardState) {
		hs = rd.HardState
	}
	sync := len(rd.Entries) > 0 || (hs != nil && etcdraft.MustSync(hs, n.prevHS, 0))
	if err := n.log.save(hs, rd.Entries, snap, sync); err != nil {
		return err
	}
	n.crashPoint("persisted")
	if hs != nil {
		n.prevHS = hs
	}
	if snap != nil {
		if err := n.mem.ApplySnapshot(snap); err != nil && !errors.Is(err, etcdraft.ErrSnapOutOfDate) {
			return fmt.Errorf("raft: apply snapshot to log: %w", err)
		}
	}
	if hs != nil {
		if err := n.mem.SetHardState(hs); err != nil {
			return fmt.Errorf("raft: set hard state: %w", err)
		}
	}
	if err := n.mem.Append(rd.Entries); err != nil {
		return fmt.Errorf("raft: append to log: %w", err)
	}
	n.send(rd.Messages)
	if snap != nil && snap.GetMetadata().GetIndex() > n.appliedIndex {
		n.watch.Lock()
		ws := n.watch.list
		err := n.restore(snap)
		n.watch.Unlock()
		if err != nil {
			return err
		}
		n.crashPoint("restored")
		deliver(ws, []meta.Change{{Kind: meta.ChangeReset}})
		n.failPending(ErrStateReplaced)
		n.publishApplied(n.appliedIndex)
		if err := n.syncPeers(); err != nil {
			return err
		}
	}
	confChanged, err := n.apply(rd.CommittedEntries)
	if err != nil {
		return err
	}
	n.crashPoint("applied")
	for _, rs := range rd.ReadStates {
		select {
		case n.readStates <- rs:
		default: // the read loop asks again
		}
	}
	return n.maybeSnapshot(confChanged)
}

func (n *Node) setLead(lead uint64) {
	old := n.lead.Swap(lead)
	if old == lead {
		return
	}
	n.leadMu.Lock()
	close(n.leadCh)
	n.leadCh = make(chan struct{})
	n.leadMu.Unlock()
	if old != 0 {
		// Writes proposed through the old leader may be lost; waiting
		// for them until the caller's deadline helps nobody.
		n.failPending(ErrLeaderChanged)
	}
}

type applyResult struct {
	id uint64
	r  result
}

// apply applies committed entries in one unsynced batch: the raft log is
// the durable record, and the batch carries the applied index, so after a
// crash the state and its index agree and raft replays the rest. Once the
// batch is committed its changes go to the watchers, then the waiting
// reads and writes are released.
func (n *Node) apply(ents []*raftpb.Entry) (confChanged bool, err error) {
	if len(ents) == 0 {
		return false, nil
	}
	n.watch.Lock()
	ws := n.watch.list
	var cs *changeSet
	if len(ws) > 0 {
		cs = newChangeSet()
	}
	a, err := n.applyWatchLocked(ents, cs)
	n.watch.Unlock()
	if err != nil {
		return false, err
	}
	deliver(ws, cs.changes())
	n.publishApplied(n.appliedIndex)
	for _, c := range a.peerChanges {
		if c.remove && c.p.ID != n.cfg.ID {
			n.removeQueue(c.p.ID)
		}
	}
	if ps, ok := n.cfg.Transport.(PeerSetter); ok {
		for _, c := range a.peerChanges {
			switch {
			case c.p.ID == n.cfg.ID:
			case c.remove:
				ps.RemovePeer(c.p.ID)
			case c.p.RaftAddr != "":
				ps.SetPeer(c.p.ID, c.p.RaftAddr)
			}
		}
	}
	for _, r := range a.results {
		n.resolve(r.id, r.r)
	}
	return a.confChanged, nil
}

type peerChange struct {
	remove bool
	p      Peer
}

// appliedBatch is what applying a batch leaves to do once it is committed.
type appliedBatch struct {
	results     []applyResult
	peerChanges []peerChange
	confChanged bool
}

// applyWatchLocked applies ents to a new batch, recording their changes in
// cs when it is not nil, and commits it. n.watch is held.
func (n *Node) applyWatchLocked(ents []*raftpb.Entry, cs *changeSet) (appliedBatch, error) {
	var a appliedBatch
	b := n.state.NewIndexedBatch()
	defer b.Close()
	for _, e := range ents {
		if e.GetIndex() <= n.appliedIndex {
			continue
		}
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.GetData()) == 0 {
				break // a new leader's empty entry
			}
			err := applyEntry(b, e.GetData(), cs, func(id uint64, r result) {
				a.results = append(a.results, applyResult{id, r})
			})
			if errors.Is(err, errCorrupt) {
				// Every node skips the same bytes the same way.
				if n.cfg.Logger != nil {
					n.cfg.Logger.Error("raft: skipped corrupt entry", "index", e.GetIndex(), "err", err)
				}
			} else if err != nil {
				return a, err
			}
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return a, fmt.Errorf("raft: corrupt configuration change at %d: %w", e.GetIndex(), err)
			}
			n.confState = n.raft.ApplyConfChange(&cc)
			a.confChanged = true
			switch cc.GetType() {
			case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
				p := Peer{ID: cc.GetNodeId()}
				if len(cc.GetContext()) > 0 {
					if err := json.Unmarshal(cc.GetContext(), &p); err != nil || p.ID != cc.GetNodeId() {
						p = Peer{ID: cc.GetNodeId()}
					}
				}
				v, err := json.Marshal(p)
				if err != nil {
					return a, fmt.Errorf("raft: encode peer: %w", err)
				}
				if err := b.Set(peerKey(p.ID), v, nil); err != nil {
					return a, stageErr(err)
				}
				a.peerChanges = append(a.peerChanges, peerChange{p: p})
			case raftpb.ConfChangeRemoveNode:
				if err := b.Delete(peerKey(cc.GetNodeId()), nil); err != nil {
					return a, stageErr(err)
				}
				a.peerChanges = append(a.peerChanges, peerChange{remove: true, p: Peer{ID: cc.GetNodeId()}})
			}
			a.results = append(a.results, applyResult{cc.GetId(), result{}})
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return a, fmt.Errorf("raft: corrupt configuration change at %d: %w", e.GetIndex(), err)
			}
			n.confState = n.raft.ApplyConfChange(&cc)
			a.confChanged = true
		}
		n.appliedIndex = e.GetIndex()
	}
	if err := n.stageApplied(b); err != nil {
		return a, err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return a, fmt.Errorf("raft: write state: %w", err)
	}
	return a, nil
}

func (n *Node) stageApplied(b *pebble.Batch) error {
	cs, err := proto.Marshal(n.confState)
	if err != nil {
		return fmt.Errorf("raft: encode conf state: %w", err)
	}
	if err := b.Set(keyConfState, cs, nil); err != nil {
		return stageErr(err)
	}
	return setU64(b, keyApplied, n.appliedIndex)
}

func (n *Node) loadApplied() error {
	idx, err := getU64(n.state, keyApplied)
	if err != nil {
		return err
	}
	n.appliedIndex = idx
	v, closer, err := n.state.Get(keyConfState)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raft: read conf state: %w", err)
	}
	defer closer.Close()
	cs := &raftpb.ConfState{}
	if err := proto.Unmarshal(v, cs); err != nil {
		return fmt.Errorf("raft: corrupt conf state: %w", err)
	}
	n.confState = cs
	return nil
}

// syncPeers tells the transport every member after a snapshot replaced
// the membership.
func (n *Node) syncPeers() error {
	ps, ok := n.cfg.Transport.(PeerSetter)
	if !ok {
		return nil
	}
	peers, err := n.storedPeers(n.state)
	if err != nil {
		return err
	}
	for _, p := range peers {
		if p.ID != n.cfg.ID && p.RaftAddr != "" {
			ps.SetPeer(p.ID, p.RaftAddr)
		}
	}
	return nil
}
