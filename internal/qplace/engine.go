package qplace

import (
	"context"

	"github.com/warrenmq/broker/internal/multiraft"
)

// Engine is what placement needs of one member's raft engine.
// *multiraft.Engine satisfies it.
type Engine interface {
	// ID is the member's id.
	ID() uint64
	// GroupInfos lists the groups on the member with their leader and
	// replicas (and, for those it leads, the replicas that are current).
	GroupInfos(ctx context.Context) ([]multiraft.GroupInfo, error)
	// Status is one group's state on the member (its leader), read
	// without listing every group.
	Status(ctx context.Context, group uint64) (multiraft.Status, error)
	// Alive lists the member and the members it hears from.
	Alive(ctx context.Context) ([]uint64, error)
	// TransferLeader asks the member, which leads group, to hand its
	// leadership to member.
	TransferLeader(ctx context.Context, group, member uint64) error
	// AddLearner, AddReplica and RemoveReplica change a group's
	// configuration; AddReplica promotes a learner.
	AddLearner(ctx context.Context, group, member uint64) error
	AddReplica(ctx context.Context, group, member uint64) error
	RemoveReplica(ctx context.Context, group, member uint64) error
}

var _ Engine = (*multiraft.Engine)(nil)

// View is the cluster as a decision sees it: every group with its leader
// and replicas, and the members up now.
type View struct {
	Groups []multiraft.GroupInfo
	Live   []uint64
}

// ViewFunc reads the current View.
type ViewFunc func(ctx context.Context) (View, error)

// LocalView is the View of one member's engine alone: complete when the
// member replicates every group (a 3-member cluster with 3 replicas a
// group); otherwise the caller merges the members' views, or reads the
// placements from the metadata group.
func LocalView(e Engine) ViewFunc {
	return func(ctx context.Context) (View, error) {
		gs, err := e.GroupInfos(ctx)
		if err != nil {
			return View{}, err
		}
		live, err := e.Alive(ctx)
		if err != nil {
			return View{}, err
		}
		return View{Groups: gs, Live: live}, nil
	}
}

// MergeViews joins members' views into one: a group's entry is taken
// from the member that leads it when one does (its Current is only known
// there), else from the first view listing it; Live is the union.
func MergeViews(views ...View) View {
	byID := map[uint64]int{}
	var out View
	live := map[uint64]bool{}
	for _, v := range views {
		for _, m := range v.Live {
			live[m] = true
		}
	}
	for _, v := range views {
		for _, g := range v.Groups {
			i, seen := byID[g.ID]
			switch {
			case !seen:
				byID[g.ID] = len(out.Groups)
				out.Groups = append(out.Groups, g)
			case g.Current != nil && out.Groups[i].Current == nil:
				out.Groups[i] = g
			}
		}
	}
	for m := range live {
		out.Live = append(out.Live, m)
	}
	sortIDs(out.Live)
	return out
}
