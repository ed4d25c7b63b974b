package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/peer"
	"github.com/warrenmq/broker/internal/qplace"
	"github.com/warrenmq/broker/meta/raft"
)

const (
	// DefaultPollInterval is how often a Node samples raft leadership and
	// member liveness.
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultDeadAfter is how long the leader must not hear from a member
	// before the deliveries that member held go back to their queues.
	DefaultDeadAfter = 10 * time.Second
)

// Config configures one cluster node.
type Config struct {
	// Raft is this member's configuration (ID, Dir, Peers, Transport, ...).
	Raft raft.Config
	// Broker is the configuration of the broker the node runs. Meta,
	// Shards, Unacked and DataDir must be zero (the raft group holds the
	// data) and Node is set by the cluster, which also tells the broker
	// which members are alive and forwards direct reply-to replies.
	Broker broker.Options
	// Listen is the AMQP address this node serves ("" serves none; tests
	// reach the broker through Node.Broker).
	Listen string
	// ListenTLS is the AMQPS address this node serves with
	// Broker.TLSConfig ("" serves none).
	ListenTLS string
	// PollInterval is how often leadership and liveness are sampled; 0
	// means DefaultPollInterval.
	PollInterval time.Duration
	// DeadAfter is how long the raft leader must not hear from a member
	// before it returns that member's unacknowledged deliveries to their
	// queues (redelivered, to consumers on the other nodes); 0 means
	// DefaultDeadAfter. Shorter fails over sooner; too short returns the
	// deliveries of a member that was only slow, which are then delivered
	// twice.
	DeadAfter time.Duration
	// PauseAfter is how long the node may know no raft leader before it
	// closes its broker (its clients get 320 CONNECTION_FORCED and
	// reconnect elsewhere), as RabbitMQ's pause_minority does; it serves
	// again once it knows a leader. 0 means three election timeouts, long
	// enough for an ordinary election.
	PauseAfter time.Duration
	// ReplyTimeout bounds how long a mandatory direct reply-to reply to a
	// requester on another member waits for that member's answer (and a
	// queue.declare of such a name for its check) before it counts as
	// unroutable: the member is down, cut off or too slow. 0 means
	// DefaultReplyTimeout. It delays only the replying channel.
	ReplyTimeout time.Duration
	// QueueGroups gives each durable quorum queue and stream a raft group
	// of its own (internal/qgroup, on
	// one internal/multiraft engine per member): its publishes, claims
	// and acks go through its own group's leader, so queues led by
	// different members do not wait on each other. Queue groups need a
	// raft transport that carries member messages (raft.Messenger; both
	// of package raft's do), which carries their frames. Every member
	// must set it alike. Off (the default), every durable queue's data
	// stays in the metadata group, as before queue groups: they are opt-in
	// while a member starved of CPU can stall its queues' consumers (see
	// docs/cluster.md, "Queue groups").
	QueueGroups bool
	// QueueGroupsOverExisting lets queue groups start on a raft directory
	// written by a cluster without them: the queues declared before keep
	// their data in the metadata group, and only queues declared from
	// then on get groups. Without it such a directory is refused
	// (ErrGroupsMigration).
	QueueGroupsOverExisting bool
	// QueueLeaderLocator is the member's default leader locator for new
	// quorum queues and streams (RabbitMQ's queue_leader_locator
	// setting): "client-local" (the default when "") or "balanced"
	// (RabbitMQ's deprecated synonyms are taken too). A queue's
	// x-queue-leader-locator argument wins over it, and the
	// queue-leader-locator key of the policy that applies to it wins over
	// both. Start refuses another value.
	QueueLeaderLocator string
}

// NodeName is the broker name of raft member id: what unacked index
// entries, the management API and logs call it.
func NodeName(id uint64) string { return "warren@" + strconv.FormatUint(id, 10) }

// nodeID parses a NodeName.
func nodeID(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, "warren@")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return id, err == nil
}

// Node is one running cluster member. Its methods are safe for concurrent
// use.
type Node struct {
	cfg  Config
	raft *raft.Node
	log  *slog.Logger

	mu     sync.Mutex
	broker *broker.Broker // non-nil while serving

	live liveness
	// replies forwards direct reply-to replies between members; nil when
	// the raft transport carries no raft.Messages.
	replies *replyRouter
	// groups are the member's queue groups; nil without Config.QueueGroups.
	groups *groups

	stop chan struct{}
	done chan struct{}
}

// liveness is the leader's memory of when it last heard from each member.
type liveness struct {
	mu           sync.Mutex
	leadingSince time.Time // zero while not leading
	lastSeen     map[uint64]time.Time
}

// Start starts the raft member and the supervisor that runs the node's
// broker.
func Start(cfg Config) (*Node, error) {
	o := cfg.Broker
	if o.Storage.Meta != nil || o.Storage.Shards != nil || o.Storage.Unacked != nil || o.DataDir != "" {
		return nil, errors.New("cluster: Broker.Meta, Shards, Unacked and DataDir must be zero: the raft group holds the data")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = DefaultDeadAfter
	}
	if cfg.PauseAfter <= 0 {
		tick, ticks := cfg.Raft.TickInterval, cfg.Raft.ElectionTicks
		if tick <= 0 {
			tick = 100 * time.Millisecond // raft.Config's defaults
		}
		if ticks <= 0 {
			ticks = 10
		}
		cfg.PauseAfter = 3 * time.Duration(ticks) * tick
	}
	if cfg.QueueLeaderLocator != "" {
		if _, err := qplace.ParseLocator(cfg.QueueLeaderLocator); err != nil {
			return nil, fmt.Errorf("cluster: Config.QueueLeaderLocator: %w", err)
		}
	}
	if err := checkGroupsDir(&cfg); err != nil {
		return nil, err
	}
	msgr, hasMsgr := cfg.Raft.Transport.(raft.Messenger)
	if cfg.QueueGroups && !hasMsgr {
		return nil, fmt.Errorf("cluster: queue groups need a raft transport that carries member messages (raft.Messenger), and %T does not: leave Config.QueueGroups off to run without them", cfg.Raft.Transport)
	}
	rn, err := raft.Start(cfg.Raft)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg, raft: rn, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	n.live.lastSeen = make(map[uint64]time.Time)
	if cfg.QueueGroups {
		g, err := startGroups(n, msgr)
		if err != nil {
			_ = rn.Stop()
			return nil, fmt.Errorf("cluster: %w", err)
		}
		n.groups = g
		msgr = g // the reply router reads what the groups do not take
	}
	if hasMsgr {
		if cfg.ReplyTimeout <= 0 {
			cfg.ReplyTimeout = DefaultReplyTimeout
		}
		n.replies = newReplyRouter(n, msgr, cfg.ReplyTimeout)
	}
	go n.supervise()
	return n, nil
}

// Raft returns the node's raft member.
func (n *Node) Raft() *raft.Node { return n.raft }

// Name returns the node's broker name (NodeName of its raft id).
func (n *Node) Name() string { return NodeName(n.raft.ID()) }

// Broker returns the broker this node serves, nil while it does not (it is
// starting, or paused because it knows no leader).
func (n *Node) Broker() *broker.Broker {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.broker
}

// Stop closes the node's broker, then stops the raft member. Closing a
// broker commits its last acks and requeues, which needs a quorum: when the
// broker has not closed within two election timeouts (this node is cut
// off, or the others are gone), Stop stops the raft member anyway, which
// fails every store call the broker waits on; the leader's scanner returns
// what it could not commit once DeadAfter has passed.
func (n *Node) Stop() error {
	close(n.stop)
	r := n.cfg.Raft
	tick, ticks := r.TickInterval, r.ElectionTicks
	if tick <= 0 {
		tick = 100 * time.Millisecond
	}
	if ticks <= 0 {
		ticks = 10
	}
	grace := time.NewTimer(2 * time.Duration(ticks) * tick)
	defer grace.Stop()
	select {
	case <-n.done:
	case <-grace.C:
	}
	var gerr error
	if n.groups != nil {
		// Fails what the broker still waits on in a queue group, as
		// stopping the raft member fails the rest.
		gerr = n.groups.close()
	}
	err := errors.Join(n.raft.Stop(), gerr)
	<-n.done
	if n.replies != nil {
		n.replies.close()
	}
	return err
}

// supervise runs the broker: it starts one once the member knows a leader
// (broker.New writes to the group), pauses it when the member has known no
// leader for PauseAfter, and samples liveness while the member leads.
func (n *Node) supervise() {
	defer close(n.done)
	tick := time.NewTicker(n.cfg.PollInterval)
	defer tick.Stop()
	var leaderless time.Time // when the member last lost its leader; zero while it has one
	for {
		select {
		case <-n.stop:
			n.closeBroker()
			return
		case <-tick.C:
		}
		now := time.Now()
		n.sampleLiveness(now)
		hasLeader := n.raft.Leader() != 0
		switch {
		case hasLeader:
			leaderless = time.Time{}
		case leaderless.IsZero():
			leaderless = now
		}
		serving := n.Broker() != nil
		switch {
		case hasLeader && !serving:
			if err := n.startBroker(); err != nil {
				n.log.Warn("cluster: broker did not start", "node", n.Name(), "err", err)
			}
		case !hasLeader && serving && now.Sub(leaderless) >= n.cfg.PauseAfter:
			n.log.Warn("cluster: no raft leader, pausing: closing the broker", "node", n.Name(), "for", now.Sub(leaderless))
			n.closeBroker()
		}
	}
}

// sampleLiveness records, on the leader, which members it heard from.
func (n *Node) sampleLiveness(now time.Time) {
	ids, leading := n.raft.LiveNodes()
	l := &n.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if !leading {
		l.leadingSince = time.Time{}
		clear(l.lastSeen)
		return
	}
	if l.leadingSince.IsZero() {
		l.leadingSince = now
	}
	for _, id := range ids {
		l.lastSeen[id] = now
	}
}

// peerAlive is the broker's peer.Peers.Alive: a member is dead when this
// node leads and has not heard from it for DeadAfter. Off the leader, or
// before the leader has watched for DeadAfter, every member counts as
// alive, so nothing is returned on too little evidence.
func (n *Node) peerAlive(name string) bool {
	id, ok := nodeID(name)
	if !ok {
		return true // not a cluster member's entry: not ours to judge
	}
	now := time.Now()
	l := &n.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leadingSince.IsZero() || now.Sub(l.leadingSince) < n.cfg.DeadAfter {
		return true
	}
	seen, ok := l.lastSeen[id]
	return ok && now.Sub(seen) < n.cfg.DeadAfter
}

func (n *Node) startBroker() error {
	o := n.cfg.Broker
	o.Storage.Meta, o.Storage.Shards, o.Storage.Unacked = n.raft, n.raft.Shards(), n.raft.Unacked()
	p := peer.Peers{Alive: n.peerAlive}
	if n.groups != nil {
		gm := &groupedMeta{Node: n.raft, mgr: n.groups.mgr}
		o.Storage.Meta, p.QueueReplicas = gm, gm
		o.Storage.Shards, o.Storage.Unacked = n.groups.mgr.Shards(), n.groups.mgr.Index()
	}
	o.Node = n.Name()
	if o.LinkLease <= 0 {
		// A dead member's shovels and federation links run elsewhere as
		// soon as its deliveries are returned.
		o.LinkLease = n.cfg.DeadAfter
	}
	if n.replies != nil {
		p.Replies = n.replies
	}
	peer.Attach(&o, p)
	b, err := broker.New(o)
	if err != nil {
		return err
	}
	if n.cfg.Listen != "" {
		if _, err := b.Listen(n.cfg.Listen); err != nil {
			b.Close()
			return err
		}
	}
	if n.cfg.ListenTLS != "" {
		if _, err := b.ListenTLS(n.cfg.ListenTLS); err != nil {
			b.Close()
			return err
		}
	}
	n.log.Info("cluster: serving AMQP", "node", n.Name(), "addr", n.cfg.Listen, "tls_addr", n.cfg.ListenTLS)
	n.mu.Lock()
	n.broker = b
	n.mu.Unlock()
	return nil
}

func (n *Node) closeBroker() {
	n.mu.Lock()
	b := n.broker
	n.broker = nil
	n.mu.Unlock()
	if b != nil {
		b.Close()
	}
}
