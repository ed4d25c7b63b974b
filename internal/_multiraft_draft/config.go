package multiraft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"time"
)

// StateMachine is one group's replicated state on one member. The engine
// owns it: it calls it only from its loop, never concurrently, in log
// order.
type StateMachine interface {
	// Apply applies a committed command at index and returns the result
	// handed to the proposer (when the proposer is this member).
	Apply(index uint64, command []byte) []byte
	// Snapshot returns the state as of the last applied index.
	Snapshot() ([]byte, error)
	// Restore replaces the state with a snapshot's (nil: the empty state).
	Restore(snapshot []byte) error
}

// Config configures an Engine.
type Config struct {
	// ID is this member's id, not 0.
	ID uint64
	// Dir is the directory of the member's one Pebble database.
	Dir string
	// Listener is where the other members connect (the engine closes it).
	Listener net.Listener
	// Peers is every other member's id and address.
	Peers map[uint64]string
	// Secret is the cluster secret members authenticate each other with
	// (and seal their frames under). Without it Insecure must be set: the
	// connections are then authenticated by what Dial and Listener do
	// (mutual TLS) or not at all (tests).
	Secret   []byte
	Insecure bool
	// Dial connects to a member's address; nil is a TCP dial.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// NewStateMachine returns the empty state machine of a group, at
	// creation and at restart (the engine restores it from the group's
	// snapshot and replays the log after it).
	NewStateMachine func(group uint64) StateMachine

	// TickInterval is raft's tick (default 100ms); ElectionTicks (10) and
	// HeartbeatTicks (1) are in ticks.
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int
	// SnapshotEntries is how many applied entries make a group snapshot
	// its state machine and drop its log before them (default 10000).
	SnapshotEntries uint64
	// MaxSnapshotsInFlight bounds the snapshots this member sends at once,
	// over all groups (default 2): the others wait for raft to retry.
	MaxSnapshotsInFlight int
	// MaxPendingProposals bounds a group's proposals waiting on this
	// member (default 4096); past it Propose answers ErrBusy.
	MaxPendingProposals int
	// MaxFrame bounds a frame read from a peer (default 64 MiB).
	MaxFrame int
	// Logger gets the engine's warnings; nil discards them.
	Logger *slog.Logger
}

// The engine's errors.
var (
	ErrClosed        = errors.New("multiraft: engine closed")
	ErrNoGroup       = errors.New("multiraft: no such group on this member")
	ErrGroupExists   = errors.New("multiraft: the group already exists on this member")
	ErrNoLeader      = errors.New("multiraft: the group has no leader now")
	ErrBusy          = errors.New("multiraft: too many proposals waiting in the group")
	ErrGroupRemoved  = errors.New("multiraft: the group was removed while the operation waited")
	errNeedsSecret   = errors.New("multiraft: Config.Secret is required (or Insecure, under mutual TLS or in tests)")
	errBadGroupID    = errors.New("multiraft: group ids 0 and 2^64-1 are reserved")
	errConfigMissing = errors.New("multiraft: Config needs ID, Dir, Listener and NewStateMachine")
)

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	if cfg.ID == 0 || cfg.Dir == "" || cfg.Listener == nil || cfg.NewStateMachine == nil {
		return cfg, errConfigMissing
	}
	if cfg.Secret == nil && !cfg.Insecure {
		return cfg, errNeedsSecret
	}
	if cfg.Secret != nil && len(cfg.Secret) < 16 {
		return cfg, fmt.Errorf("multiraft: the cluster secret has %d bytes, at least 16 are needed", len(cfg.Secret))
	}
	for id := range cfg.Peers {
		if id == 0 || id == cfg.ID {
			return cfg, fmt.Errorf("multiraft: peer id %d (this member is %d)", id, cfg.ID)
		}
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks <= 0 {
		cfg.HeartbeatTicks = 1
	}
	if cfg.SnapshotEntries == 0 {
		cfg.SnapshotEntries = 10000
	}
	if cfg.MaxSnapshotsInFlight <= 0 {
		cfg.MaxSnapshotsInFlight = 2
	}
	if cfg.MaxPendingProposals <= 0 {
		cfg.MaxPendingProposals = 4096
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return cfg, nil
}

func checkGroupID(id uint64) error {
	if id == 0 || id == math.MaxUint64 {
		return errBadGroupID
	}
	return nil
}

// raft's flow control per group: what one append message carries and how
// many may be unacknowledged to one follower.
const (
	maxSizePerMsg        = 1 << 20
	maxInflightMsgs      = 64
	maxCommittedPerReady = 4 << 20
	maxUncommittedBytes  = 64 << 20
)
