package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/raft"

	"github.com/warrenmq/broker/internal/qgroup"
	"github.com/warrenmq/broker/internal/qplace"
)

// groupsTag leads every member message that carries queue-group frames;
// direct reply-to messages start with their kind (1 to 3), so one
// connection per member pair carries both.
const groupsTag byte = 0x80

// GroupsDir is the directory under Config.Raft.Dir holding the member's
// queue groups (one multiraft database).
const GroupsDir = "groups"

// groups is a Node's queue groups: the manager, the link its engine talks
// over (the raft transport's member messages) and the members it reaches.
type groups struct {
	mgr     *qgroup.Manager
	msgr    raft.Messenger
	self    uint64
	members atomic.Pointer[[]uint64]
	replies chan raft.Message // what the reply router reads
	// rebalance keeps this member's leaderships at most qplace.Limit,
	// moving some away a while after a member comes back.
	rebalance *qplace.Rebalancer
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// startGroups opens the member's queue groups on its raft node. It refuses
// a data directory that an earlier cluster without queue groups used
// (see ErrGroupsMigration).
func startGroups(n *Node, msgr raft.Messenger) (*groups, error) {
	dir := filepath.Join(n.cfg.Raft.Dir, GroupsDir)
	g := &groups{msgr: msgr, self: n.cfg.Raft.ID, replies: make(chan raft.Message, 1024)}
	ids := make([]uint64, 0, len(n.cfg.Raft.Peers))
	for _, p := range n.cfg.Raft.Peers {
		ids = append(ids, p.ID)
	}
	g.members.Store(&ids)
	g.ctx, g.cancel = context.WithCancel(context.Background())
	r := n.cfg.Raft
	mgr, err := qgroup.Open(qgroup.Config{
		Self: r.ID, Dir: dir, Meta: n.raft,
		Fallback: qgroup.Fallback{Shards: n.raft.Shards(), Index: n.raft.Unacked(), Cursors: n.raft},
		Members:  g.readMembers(n.raft),
		Link:     g, TickInterval: r.TickInterval, ElectionTicks: r.ElectionTicks, Logger: n.log,
		Locator: n.cfg.QueueLeaderLocator,
	})
	if err != nil {
		g.cancel()
		return nil, err
	}
	g.mgr = mgr
	// Every member holds every group, so its own engine's view is the
	// whole cluster's: each member moves only leaderships it holds.
	g.rebalance, err = qplace.StartRebalancer(qplace.RebalancerConfig{Engine: mgr.Engine(), Logger: n.log})
	if err != nil {
		_ = mgr.Close()
		g.cancel()
		return nil, err
	}
	g.wg.Add(2)
	go func() { defer g.wg.Done(); g.receive() }()
	go func() { defer g.wg.Done(); g.refresh(n.raft) }()
	return g, nil
}

// checkGroupsDir refuses, before the raft member starts, a raft
// directory that a cluster without queue groups wrote (it has raft's log
// but no GroupsDir), unless the caller accepts keeping its queues where
// they are.
func checkGroupsDir(cfg *Config) error {
	if !cfg.QueueGroups || cfg.QueueGroupsOverExisting {
		return nil
	}
	_, logErr := os.Stat(filepath.Join(cfg.Raft.Dir, "log"))
	_, groupsErr := os.Stat(filepath.Join(cfg.Raft.Dir, GroupsDir))
	if logErr == nil && errors.Is(groupsErr, os.ErrNotExist) {
		return fmt.Errorf("%w (%s)", ErrGroupsMigration, cfg.Raft.Dir)
	}
	return nil
}

// ErrGroupsMigration refuses to turn queue groups on over a data
// directory a cluster without them wrote: its quorum queues' messages are
// in the metadata group. docs/cluster.md gives the way: either leave
// Config.QueueGroups off for that cluster, or set
// Config.QueueGroupsOverExisting, under which the queues declared before
// keep their data in the metadata group (as classic durable queues do)
// and only queues declared after get groups.
var ErrGroupsMigration = errors.New("cluster: this raft directory was written by a cluster without queue groups: leave Config.QueueGroups (-queue-groups) off to run it as before, or set Config.QueueGroupsOverExisting (-queue-groups-over-existing) to keep its queues in the metadata group and give only new queues groups (docs/cluster.md, \"Queue groups\")")

func (g *groups) readMembers(rn *raft.Node) func(context.Context) ([]uint64, error) {
	return func(ctx context.Context) ([]uint64, error) {
		peers, err := rn.Peers(ctx)
		if err != nil {
			return nil, err
		}
		ids := make([]uint64, len(peers))
		for i, p := range peers {
			ids[i] = p.ID
		}
		slices.Sort(ids)
		g.members.Store(&ids)
		return ids, nil
	}
}

// refresh rereads the membership now and then, for the engine's peers.
func (g *groups) refresh(rn *raft.Node) {
	read := g.readMembers(rn)
	t := time.NewTicker(replyMemberRefresh)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-g.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(g.ctx, replyMemberRefresh/2)
		_, _ = read(ctx)
		cancel()
	}
}

// Send implements multiraft.Link over the member messages.
func (g *groups) Send(to uint64, data []byte) error {
	b := make([]byte, 1+len(data))
	b[0] = groupsTag
	copy(b[1:], data)
	ctx, cancel := context.WithTimeout(g.ctx, 5*time.Second)
	defer cancel()
	return g.msgr.SendMessages(ctx, []raft.Message{{To: to, Data: b}})
}

// Members implements multiraft.Link.
func (g *groups) Members() []uint64 { return *g.members.Load() }

// receive sorts the member messages: queue-group frames to the engine,
// the rest to the reply router (through Messages).
func (g *groups) receive() {
	in := g.msgr.Messages()
	for {
		select {
		case <-g.ctx.Done():
			return
		case m := <-in:
			if len(m.Data) > 0 && m.Data[0] == groupsTag {
				if !slices.Contains(g.Members(), m.From) {
					continue // not a member (as the reply router drops it)
				}
				_ = g.mgr.Deliver(m.From, m.Data[1:])
				continue
			}
			select {
			case g.replies <- m:
			default: // the router is behind: dropped, as the transport drops
			}
		}
	}
}

// SendMessages and Messages make groups the reply router's raft.Messenger.
func (g *groups) SendMessages(ctx context.Context, msgs []raft.Message) error {
	return g.msgr.SendMessages(ctx, msgs)
}

func (g *groups) Messages() <-chan raft.Message { return g.replies }

func (g *groups) close() error {
	g.rebalance.Stop()
	err := g.mgr.Close()
	g.cancel()
	g.wg.Wait()
	return err
}

// groupedMeta is the metadata group as the broker of a node with queue
// groups sees it: everything of raft.Node's, but the cursors and the
// change feed cover the queue groups too, and a queue's declaration and
// deletion place and remove its group.
type groupedMeta struct {
	*raft.Node
	mgr *qgroup.Manager
}

func (m *groupedMeta) Offset(ctx context.Context, q meta.QueueKey) (uint64, error) {
	return m.mgr.Offset(ctx, q)
}

func (m *groupedMeta) CompareAndSwapOffset(ctx context.Context, q meta.QueueKey, old, new uint64) (bool, error) {
	return m.mgr.CompareAndSwapOffset(ctx, q, old, new)
}

// PutQueue places a new replicated queue's group first, so that every
// member knows the group before it learns of the queue.
func (m *groupedMeta) PutQueue(ctx context.Context, q meta.Queue) error {
	if err := m.mgr.Declare(ctx, q); err != nil {
		return err
	}
	return m.Node.PutQueue(ctx, q)
}

// DeleteQueue deletes the declaration, then the queue's group.
func (m *groupedMeta) DeleteQueue(ctx context.Context, vhost, name string) error {
	if err := m.Node.DeleteQueue(ctx, vhost, name); err != nil {
		return err
	}
	return m.mgr.Forget(ctx, meta.QueueKey{VHost: vhost, Name: name})
}

// Watch follows both the metadata group and the queue groups; fn is
// called by one of them at a time.
func (m *groupedMeta) Watch(fn func(meta.Change)) (cancel func()) {
	var mu sync.Mutex
	one := func(c meta.Change) {
		mu.Lock()
		defer mu.Unlock()
		fn(c)
	}
	c1 := m.Node.Watch(one)
	c2 := m.mgr.Watch(one)
	return func() { c1(); c2() }
}

// GroupStatus is a queue's raft group as one member sees it.
type GroupStatus struct {
	// Group is the group's id, the same on every member.
	Group uint64
	// Leader is the member leading it (0: none known now).
	Leader   uint64
	Term     uint64
	Commit   uint64
	Voters   []uint64
	Learners []uint64
	// Quiesced: idle, its leader sends it no heartbeats.
	Quiesced bool
}

// QueueGroup returns the raft group of queue name in vhost as this member
// sees it; false when the queue has no group of its own (QueueGroups is
// off, or it is not a replicated queue, or its data stayed in the
// metadata group). It asks the member's engine, waiting at most a second
// or until ctx ends.
func (n *Node) QueueGroup(ctx context.Context, vhost, name string) (GroupStatus, bool) {
	if n.groups == nil {
		return GroupStatus{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, ok := n.groups.mgr.Status(ctx, meta.QueueKey{VHost: vhost, Name: name})
	return GroupStatus(st), ok
}
