package raft

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Peer is one member of the cluster.
type Peer struct {
	// ID is the raft node id, not 0.
	ID uint64
	// RaftAddr is where the member's raft transport listens (host:port).
	RaftAddr string
	// AMQPAddr is the member's client address. The group only stores it,
	// for the broker to tell clients where to go.
	AMQPAddr string
}

// Config configures a Node. The zero value of every optional field picks
// the documented default; Start never modifies the caller's Config.
type Config struct {
	// ID is this node's raft id: not 0, unique in the cluster.
	ID uint64
	// Dir holds the node's data: raft log and state machine, in two Pebble
	// DBs under Dir/log and Dir/state. Required.
	Dir string
	// Peers is the initial membership, this node included. It is used only
	// to bootstrap a new cluster (Dir holds no raft state yet); after that
	// membership lives in the log and changes through AddNode/RemoveNode.
	// Every founding member must be started with the same Peers.
	Peers []Peer
	// Join starts a node with an empty Dir without bootstrapping: it waits
	// to be added (AddNode on a member) and receives the state from the
	// leader. Peers is ignored.
	Join bool
	// Transport carries messages to the other members. Required; the
	// caller closes it after Stop.
	Transport Transport
	// TickInterval is raft's logical clock period. Default 100ms.
	TickInterval time.Duration
	// ElectionTicks is how many ticks a follower waits without hearing from
	// a leader before it campaigns. Default 10.
	ElectionTicks int
	// HeartbeatTicks is how many ticks pass between leader heartbeats.
	// Default 1.
	HeartbeatTicks int
	// SnapshotEvery is how many applied entries pass between snapshots of
	// the state machine (after which the log before them is dropped).
	// Default 10000.
	SnapshotEvery uint64
	// MaxBatchBytes bounds the commands the proposer packs into one entry.
	// Default 1 MiB; a single larger command still goes alone.
	MaxBatchBytes int
	// ProposalTimeout is how long a write may wait to be applied once it
	// was handed to raft before it fails with ErrProposalLost (outcome
	// unknown): raft does not report a proposal lost on its way to the
	// leader. Default five election timeouts.
	ProposalTimeout time.Duration
	// Logger receives raft's warnings and errors. Default: discarded.
	Logger *slog.Logger

	// faults is for this package's crash tests.
	faults faults
}

// faults lets the crash tests put a node's DBs on file systems that can
// lose unsynced writes and stop it at chosen points of its Ready loop.
type faults struct {
	logFS, stateFS vfs.FS // nil: the OS file system
	// at, when set, is called by the Ready loop at each named point.
	at func(n *Node, point string)
}

func (c *Config) withDefaults() {
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 10000
	}
	if c.ProposalTimeout <= 0 {
		c.ProposalTimeout = 5 * time.Duration(c.ElectionTicks) * c.TickInterval
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 1 << 20
	}
}

// validate reports every bad field at once.
func (c *Config) validate() error {
	var errs []error
	if c.ID == 0 {
		errs = append(errs, errors.New("raft: Config.ID must not be 0"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("raft: Config.Dir is required"))
	}
	if c.Transport == nil {
		errs = append(errs, errors.New("raft: Config.Transport is required"))
	}
	if c.HeartbeatTicks >= c.ElectionTicks {
		errs = append(errs, fmt.Errorf("raft: Config.HeartbeatTicks (%d) must be less than ElectionTicks (%d)", c.HeartbeatTicks, c.ElectionTicks))
	}
	if !c.Join {
		seen := map[uint64]bool{}
		self := false
		for _, p := range c.Peers {
			if p.ID == 0 {
				errs = append(errs, errors.New("raft: Config.Peers holds id 0"))
			}
			if seen[p.ID] {
				errs = append(errs, fmt.Errorf("raft: Config.Peers holds id %d twice", p.ID))
			}
			seen[p.ID] = true
			self = self || p.ID == c.ID
		}
		if !self {
			errs = append(errs, fmt.Errorf("raft: Config.Peers does not hold this node's id %d", c.ID))
		}
	}
	return errors.Join(errs...)
}
