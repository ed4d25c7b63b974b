package qplace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/warrenmq/broker/internal/multiraft"
)

// GrowStrategy is `rabbitmq-queues grow`'s second argument: which groups
// get a replica on the new member.
type GrowStrategy string

const (
	// GrowAll: every group without a replica on the member.
	GrowAll GrowStrategy = "all"
	// GrowEven: only the groups with an even number of replicas (so
	// growing makes them odd).
	GrowEven GrowStrategy = "even"
)

// ParseGrowStrategy reads "all" or "even".
func ParseGrowStrategy(s string) (GrowStrategy, error) {
	switch GrowStrategy(s) {
	case GrowAll, GrowEven:
		return GrowStrategy(s), nil
	}
	return "", fmt.Errorf("qplace: grow strategy %q is not one of all, even", s)
}

// The membership changes' refusals.
var (
	ErrLastReplica = errors.New("qplace: the member holds the group's last replica")
	ErrNotLeader   = errors.New("qplace: this member does not lead the group")
	ErrNotCaughtUp = errors.New("qplace: the new replica did not catch up in time")
)

// PlanGrow lists the groups of gs that `rabbitmq-queues grow member
// strategy` adds a replica on member to: the ones member does not
// replicate (nor learn), all of them or, for GrowEven, those with an even
// number of voters; in gs's order.
func PlanGrow(gs []multiraft.GroupInfo, member uint64, strategy GrowStrategy) []uint64 {
	var out []uint64
	for _, g := range gs {
		if slices.Contains(g.Voters, member) || slices.Contains(g.Learners, member) {
			continue
		}
		if strategy == GrowEven && len(g.Voters)%2 != 0 {
			continue
		}
		out = append(out, g.ID)
	}
	return out
}

// PlanShrink lists the groups of gs that `rabbitmq-queues shrink member`
// removes member's replica from, and those it must refuse (member holds
// their only voter: RabbitMQ answers last_node).
func PlanShrink(gs []multiraft.GroupInfo, member uint64) (remove, refused []uint64) {
	for _, g := range gs {
		switch {
		case slices.Contains(g.Learners, member):
			remove = append(remove, g.ID)
		case !slices.Contains(g.Voters, member):
		case len(g.Voters) == 1:
			refused = append(refused, g.ID)
		default:
			remove = append(remove, g.ID)
		}
	}
	return remove, refused
}

// Grow adds member as a voter of group through e, the engine of the
// member leading it: member joins as a learner, and is promoted once its
// log matches the leader's (polled every poll, at most until ctx ends),
// so the group's quorum never counts a replica that is still catching
// up. member must have created the group empty first (CreateGroup
// without voters) for the leader's snapshot to reach it.
func Grow(ctx context.Context, e Engine, group, member uint64, poll time.Duration) error {
	g, err := info(ctx, e, group)
	if err != nil {
		return err
	}
	if slices.Contains(g.Voters, member) {
		return nil
	}
	if g.Leader != e.ID() {
		return ErrNotLeader
	}
	if !slices.Contains(g.Learners, member) {
		if err := e.AddLearner(ctx, group, member); err != nil {
			return err
		}
	}
	for {
		g, err := info(ctx, e, group)
		if err != nil {
			return err
		}
		if g.Leader != e.ID() {
			return ErrNotLeader
		}
		if slices.Contains(g.Current, member) {
			return e.AddReplica(ctx, group, member)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNotCaughtUp, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// Shrink removes member's replica from group through e, a replica of the
// group. It refuses to remove the only voter. When member leads the
// group, the group elects another leader (about an election timeout
// without one), as a quorum queue whose leader's replica is deleted
// does; the caller then removes the group on member.
func Shrink(ctx context.Context, e Engine, group, member uint64) error {
	g, err := info(ctx, e, group)
	if err != nil {
		return err
	}
	isVoter := slices.Contains(g.Voters, member)
	if !isVoter && !slices.Contains(g.Learners, member) {
		return nil
	}
	if isVoter && len(g.Voters) == 1 {
		return ErrLastReplica
	}
	return e.RemoveReplica(ctx, group, member)
}

func info(ctx context.Context, e Engine, group uint64) (multiraft.GroupInfo, error) {
	gs, err := e.GroupInfos(ctx)
	if err != nil {
		return multiraft.GroupInfo{}, err
	}
	for _, g := range gs {
		if g.ID == group {
			return g, nil
		}
	}
	return multiraft.GroupInfo{}, multiraft.ErrNoGroup
}
