package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/meta/raft"
)

// DefaultPollInterval is how often a Node checks its raft leadership.
const DefaultPollInterval = 50 * time.Millisecond

// Config configures one cluster node.
type Config struct {
	// Raft is this member's configuration (ID, Dir, Peers, Transport, ...).
	Raft raft.Config
	// Broker is the configuration of the broker the node runs while it
	// leads. Meta, Shards, Unacked and DataDir must be zero: the raft
	// group holds the data.
	Broker broker.Options
	// Listen is the AMQP address served while leading ("" serves none;
	// tests reach the broker through Node.Broker).
	Listen string
	// PollInterval is how often leadership is checked; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
}

// Node is one running cluster member. Its methods are safe for concurrent
// use.
type Node struct {
	cfg  Config
	raft *raft.Node
	log  *slog.Logger

	mu     sync.Mutex
	broker *broker.Broker // non-nil while leading and serving

	stop chan struct{}
	done chan struct{}
}

// Start starts the raft member and the supervisor that serves AMQP while
// the member leads.
func Start(cfg Config) (*Node, error) {
	o := cfg.Broker
	if o.Meta != nil || o.Shards != nil || o.Unacked != nil || o.DataDir != "" {
		return nil, errors.New("cluster: Broker.Meta, Shards, Unacked and DataDir must be zero: the raft group holds the data")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
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
	go n.supervise()
	return n, nil
}

// Raft returns the node's raft member.
func (n *Node) Raft() *raft.Node { return n.raft }

// Broker returns the broker this node serves while it leads, nil while it
// follows (or its broker is still starting).
func (n *Node) Broker() *broker.Broker {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.broker
}

// Stop closes the node's broker, if it runs one, then stops the raft
// member. Closing a broker commits its last acks and requeues, which needs
// a quorum: when the broker has not closed within two election timeouts
// (this node is cut off, or the others are gone), Stop stops the raft
// member anyway, which fails every store call the broker waits on, and
// what it could not commit is redelivered by the next leader.
func (n *Node) Stop() error {
	close(n.stop)
	r := n.cfg.Raft
	tick, ticks := r.TickInterval, r.ElectionTicks
	if tick <= 0 {
		tick = 100 * time.Millisecond // raft.Config's defaults
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
	err := n.raft.Stop()
	<-n.done
	return err
}

// supervise follows leadership: it starts a broker when the member leads
// and closes it when the member stops leading or the node stops.
func (n *Node) supervise() {
	defer close(n.done)
	tick := time.NewTicker(n.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			n.closeBroker()
			return
		case <-tick.C:
		}
		leading := n.raft.IsLeader()
		n.mu.Lock()
		serving := n.broker != nil
		n.mu.Unlock()
		switch {
		case leading && !serving:
			if err := n.startBroker(); err != nil {
				// Leadership may have moved while the broker started;
				// the next tick looks again.
				n.log.Warn("cluster: broker did not start", "node", n.raft.ID(), "err", err)
			}
		case !leading && serving:
			n.log.Info("cluster: no longer the raft leader, closing the broker", "node", n.raft.ID())
			n.closeBroker()
		}
	}
}

func (n *Node) startBroker() error {
	o := n.cfg.Broker
	o.Meta, o.Shards, o.Unacked = n.raft, n.raft.Shards(), n.raft.Unacked()
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
	n.log.Info("cluster: raft leader, serving AMQP", "node", n.raft.ID(), "addr", n.cfg.Listen)
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
