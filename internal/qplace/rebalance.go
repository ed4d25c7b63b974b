package qplace

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/warrenmq/broker/internal/multiraft"
)

// Move is one leadership transfer: group's leader hands it to To.
type Move struct {
	Group uint64
	To    uint64
}

// Limit is the most groups a member should lead when groups leaders are
// spread over members: ceil(groups/members) + 1.
func Limit(groups, members int) int {
	if members <= 0 {
		return groups
	}
	return (groups+members-1)/members + 1
}

// PlanMoves returns the leadership transfers member self should make now
// to even out leaders over the live members, as `rabbitmq-queues
// rebalance` does for quorum queues: while self leads more than
// ceil(groups/live members), one of its groups goes to the replica in
// that group's Current (alive and caught up) leading the fewest, if that
// replica leads fewer than ceil(groups/live members) (ties: the lower
// id). Groups without a leader count for no member. Each member plans
// only the groups it leads, so every member can run this at once.
func PlanMoves(v View, self uint64) []Move {
	if len(v.Live) == 0 || !slices.Contains(v.Live, self) {
		return nil
	}
	led := map[uint64]int{}
	groups := 0
	for _, g := range v.Groups {
		if g.Leader != 0 {
			led[g.Leader]++
			groups++
		}
	}
	even := (groups + len(v.Live) - 1) / len(v.Live)
	var moves []Move
	for _, g := range v.Groups {
		if led[self] <= even {
			break
		}
		if g.Leader != self {
			continue
		}
		var best uint64
		for _, c := range g.Current {
			if c == self || !slices.Contains(v.Live, c) || !slices.Contains(g.Voters, c) || led[c] >= even {
				continue
			}
			if best == 0 || cmp.Or(cmp.Compare(led[c], led[best]), cmp.Compare(c, best)) < 0 {
				best = c
			}
		}
		if best != 0 {
			moves = append(moves, Move{Group: g.ID, To: best})
			led[self]--
			led[best]++
		}
	}
	return moves
}

// RebalancerConfig configures a Rebalancer.
type RebalancerConfig struct {
	// Engine is this member's engine; the rebalancer moves only the
	// leaderships it holds.
	Engine Engine
	// View reads the cluster's groups and live members (nil:
	// LocalView(Engine)).
	View ViewFunc
	// Interval is the time between two rounds (default 10s).
	Interval time.Duration
	// Settle is how long after a member comes back (or a Kick) the next
	// round runs, so the member has caught up first (default 10s).
	Settle time.Duration
	// Check is how often the live members are read to notice one coming
	// back (default 1s).
	Check time.Duration
	// TransferTimeout bounds the wait for one transfer to complete before
	// the next starts (default 3s): one transfer in flight per member.
	TransferTimeout time.Duration
	// Logger gets the moves that failed; nil: slog.Default().
	Logger *slog.Logger
}

// Rebalancer is the goroutine that keeps a member's leaderships at most
// Limit: a round every Interval and one Settle after a member comes
// back, each round making PlanMoves' transfers one at a time. Whoever
// starts it stops it.
type Rebalancer struct {
	cfg  RebalancerConfig
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// StartRebalancer starts the rebalancing goroutine.
func StartRebalancer(c RebalancerConfig) (*Rebalancer, error) {
	if c.Engine == nil {
		return nil, errors.New("qplace: RebalancerConfig.Engine is required")
	}
	if c.View == nil {
		c.View = LocalView(c.Engine)
	}
	if c.Interval <= 0 {
		c.Interval = 10 * time.Second
	}
	if c.Settle <= 0 {
		c.Settle = 10 * time.Second
	}
	if c.Check <= 0 {
		c.Check = time.Second
	}
	if c.TransferTimeout <= 0 {
		c.TransferTimeout = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	r := &Rebalancer{cfg: c, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r, nil
}

// Kick asks for a round one Settle from now (after placements changed).
func (r *Rebalancer) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Stop ends the goroutine and waits for it; a transfer under way is
// abandoned.
func (r *Rebalancer) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

func (r *Rebalancer) run() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-r.done:
		}
	}()
	check := time.NewTicker(r.cfg.Check)
	defer check.Stop()
	next := time.Now().Add(r.cfg.Interval)
	var live []uint64
	for {
		select {
		case <-r.stop:
			return
		case <-r.kick:
			next = earlier(next, time.Now().Add(r.cfg.Settle))
		case now := <-check.C:
			if l, err := r.cfg.Engine.Alive(ctx); err == nil {
				for _, m := range l {
					if live != nil && !slices.Contains(live, m) {
						next = earlier(next, now.Add(r.cfg.Settle)) // a member came back
					}
				}
				live = l
			}
			if now.Before(next) {
				continue
			}
			r.round(ctx)
			next = time.Now().Add(r.cfg.Interval)
		}
	}
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// round plans on a fresh View and makes the moves one at a time, each
// waiting until this member no longer leads the group or TransferTimeout
// passed.
func (r *Rebalancer) round(ctx context.Context) {
	v, err := r.cfg.View(ctx)
	if err != nil {
		return
	}
	self := r.cfg.Engine.ID()
	for _, m := range PlanMoves(v, self) {
		if err := r.cfg.Engine.TransferLeader(ctx, m.Group, m.To); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.cfg.Logger.Warn("qplace: leadership transfer", "group", m.Group, "to", m.To, "err", err)
			continue
		}
		if !r.waitMoved(ctx, m.Group, self) {
			return
		}
	}
}

// waitMoved polls until self no longer leads group; false when stopped.
func (r *Rebalancer) waitMoved(ctx context.Context, group, self uint64) bool {
	deadline := time.Now().Add(r.cfg.TransferTimeout)
	poll := min(r.cfg.Check, 50*time.Millisecond)
	for time.Now().Before(deadline) {
		select {
		case <-r.stop:
			return false
		case <-time.After(poll):
		}
		// One group's status, not a listing of every group: a member
		// with thousands of groups polls this for each move.
		st, err := r.cfg.Engine.Status(ctx, group)
		if errors.Is(err, multiraft.ErrNoGroup) || (err == nil && st.Leader != self) {
			return true
		}
		if err != nil {
			return ctx.Err() == nil
		}
	}
	return true
}
