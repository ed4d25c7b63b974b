package multiraft

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// StateMachine is one group's replicated state on one member, kept in the
// group's range of the member's database (Data). The engine calls it from
// one of its appliers, never concurrently for one group and always in log
// order, never from the raft loop.
type StateMachine interface {
	// Load reads what the state machine keeps in memory from d, and keeps
	// d to read the rest from later: at the group's creation or restart
	// (d then holds the state as of the index the engine goes on from)
	// and after a Restore was committed.
	Load(d *Data) error
	// Apply applies the committed command at index, writing what it
	// changes to b, and returns the result handed to the proposer when the
	// proposer is this member. The engine commits b with the group's
	// applied index once the hand-off's entries are applied, then calls
	// Committed, then answers the proposers.
	Apply(b *Batch, index uint64, command []byte) []byte
	// Committed tells the state machine that what it wrote in Apply since
	// the last Committed is in the database: its readers may see it now.
	Committed()
	// Snapshot writes the whole state, as of the last index applied, to w:
	// what a replica that lags behind the leader's log restores.
	Snapshot(w io.Writer) error
	// Restore writes a snapshot's state (empty: the empty state) to b, in
	// which the engine deleted the group's data first; the engine commits
	// b with the snapshot's index in one Pebble batch, then calls Load and
	// Committed.
	Restore(b *Batch, snapshot []byte) error
}

// Config configures an Engine.
type Config struct {
	// ID is this member's id, not 0.
	ID uint64
	// Dir is the directory of the member's one Pebble database, which
	// holds every group's log, hard state and snapshot.
	Dir string
	// Transport carries frames to and from the other members (NewTCP, or
	// a MemNetwork's in tests). The engine does not close it: whoever made
	// it closes it after Engine.Close.
	Transport Transport
	// NewStateMachine returns the empty state machine of a group, at its
	// creation and at restart (the engine restores it from the group's
	// snapshot and replays the log after it).
	NewStateMachine func(group uint64) StateMachine

	// TickInterval is raft's tick (default 100ms); ElectionTicks (default
	// 10) and HeartbeatTicks (default 1) are in ticks.
	TickInterval   time.Duration
	ElectionTicks  int
	HeartbeatTicks int
	// SnapshotEntries is how many applied entries make a group checkpoint
	// and drop the log before it (default 10000). A checkpoint copies
	// nothing: the state machine's data is on disk, so it marks that data
	// complete up to the index; it bounds the log a group keeps, on disk
	// and in raft's memory, and what a restart replays.
	SnapshotEntries uint64
	// SnapshotBytes is how many bytes of applied entries make a group
	// checkpoint, whatever their number (default 1 MiB).
	SnapshotBytes uint64
	// SnapshotInterval is the least time between two checkpoints on this
	// member, over all groups (default 10ms): many groups crossing
	// SnapshotEntries at once take turns.
	SnapshotInterval time.Duration
	// MaxSnapshotsInFlight bounds the snapshots this member sends at once,
	// over all groups (default 2): raft hears the others failed and retries.
	MaxSnapshotsInFlight int
	// MaxSnapshotStaging bounds the bytes of the snapshots this member
	// is receiving in chunks, over all groups (default 1 GiB): a transfer
	// that would pass it is refused (the leader retries later), and so
	// is a snapshot larger than it. SnapshotChunkTimeout (default ten
	// election timeouts) abandons a transfer no chunk came for.
	MaxSnapshotStaging   uint64
	SnapshotChunkTimeout time.Duration
	// MaxPendingProposals bounds the proposals of this member waiting to
	// apply, over all groups (default 65536); past it Propose returns
	// ErrBusy.
	MaxPendingProposals int
	// Appliers is how many goroutines apply committed entries (default
	// 2); a group always applies on the same one.
	Appliers int
	// MaxApplyBytes bounds the committed entries queued for one applier
	// (default 64 MiB): past it the loop waits for the applier before it
	// hands it more, so a slow state machine slows its groups' commits
	// rather than filling memory. raft hands a group's committed entries
	// over in pieces of at most this much (and 4 MiB), so the bound holds
	// for one busy group too; one entry larger than it goes alone.
	MaxApplyBytes int
	// ProposalTimeout bounds how long a proposal handed to raft may wait
	// to apply on this member (default five election timeouts): raft does
	// not report a proposal lost on its way to the leader, so past it
	// Propose fails with ErrProposalLost (outcome unknown).
	ProposalTimeout time.Duration
	// Logger gets the engine's warnings; nil: slog.Default().
	Logger *slog.Logger
	// FS is the database's file system (nil: the disk's); tests crash a
	// member with vfs.NewCrashableMem and MemFS.CrashClone, which keeps
	// only what was synced.
	FS vfs.FS
}

// The engine's errors.
var (
	ErrClosed       = errors.New("multiraft: engine closed")
	ErrNoGroup      = errors.New("multiraft: no such group on this member")
	ErrGroupExists  = errors.New("multiraft: the group already exists on this member")
	ErrNoLeader     = errors.New("multiraft: the group has no leader now (the proposal was dropped)")
	ErrBusy         = errors.New("multiraft: too many proposals of this member waiting")
	ErrGroupRemoved = errors.New("multiraft: the group was removed while the operation waited")
	ErrNotLeader    = errors.New("multiraft: this member does not lead the group")
	// ErrLeaderChanged and ErrProposalLost leave a proposal's outcome
	// unknown: it may still commit. The caller must not report it as not
	// done (a publish is not nacked, for one).
	ErrLeaderChanged = errors.New("multiraft: the group's leader changed while the proposal waited: outcome unknown")
	ErrProposalLost  = errors.New("multiraft: the proposal did not apply within the proposal timeout: outcome unknown")
	errBadGroupID    = errors.New("multiraft: group ids 0 and 2^64-1 are reserved")
)

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	var errs []error
	if cfg.ID == 0 || cfg.ID == math.MaxUint64 {
		errs = append(errs, errors.New("multiraft: Config.ID must not be 0 or 2^64-1"))
	}
	if cfg.Dir == "" {
		errs = append(errs, errors.New("multiraft: Config.Dir is required"))
	}
	if cfg.Transport == nil {
		errs = append(errs, errors.New("multiraft: Config.Transport is required"))
	}
	if cfg.NewStateMachine == nil {
		errs = append(errs, errors.New("multiraft: Config.NewStateMachine is required"))
	}
	if cfg.HeartbeatTicks > 0 && cfg.ElectionTicks > 0 && cfg.ElectionTicks <= cfg.HeartbeatTicks {
		errs = append(errs, fmt.Errorf("multiraft: Config.ElectionTicks (%d) must be more than HeartbeatTicks (%d)", cfg.ElectionTicks, cfg.HeartbeatTicks))
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
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
	if cfg.SnapshotBytes == 0 {
		cfg.SnapshotBytes = 1 << 20
	}
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = 10 * time.Millisecond
	}
	if cfg.MaxSnapshotsInFlight <= 0 {
		cfg.MaxSnapshotsInFlight = 2
	}
	if cfg.MaxSnapshotStaging == 0 {
		cfg.MaxSnapshotStaging = 1 << 30
	}
	if cfg.SnapshotChunkTimeout <= 0 {
		cfg.SnapshotChunkTimeout = 10 * time.Duration(cfg.ElectionTicks) * cfg.TickInterval
	}
	if cfg.MaxPendingProposals <= 0 {
		cfg.MaxPendingProposals = 1 << 16
	}
	if cfg.Appliers <= 0 {
		cfg.Appliers = 2
	}
	if cfg.MaxApplyBytes <= 0 {
		cfg.MaxApplyBytes = 64 << 20
	}
	if cfg.ProposalTimeout <= 0 {
		cfg.ProposalTimeout = 5 * time.Duration(cfg.ElectionTicks) * cfg.TickInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

func checkGroupID(id uint64) error {
	if id == 0 || id == math.MaxUint64 {
		return errBadGroupID
	}
	return nil
}

// raft's flow control per group: what one append message carries, how
// many may be unacknowledged to one follower, what one Ready hands to
// apply and how much may wait uncommitted.
const (
	maxSizePerMsg        = 1 << 20
	maxInflightMsgs      = 64
	maxCommittedPerReady = 4 << 20
	maxUncommittedBytes  = 64 << 20
)
