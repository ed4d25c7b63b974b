package qplace

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Locator is a queue's leader locator, RabbitMQ's
// `x-queue-leader-locator` argument, `queue-leader-locator` policy key
// and `queue_leader_locator` setting.
type Locator string

// RabbitMQ 4.x's two leader locators.
const (
	// ClientLocal: the member the declaring client is connected to leads
	// (RabbitMQ's default).
	ClientLocal Locator = "client-local"
	// Balanced: the replica that leads the fewest groups leads.
	Balanced Locator = "balanced"
)

// DefaultSize is RabbitMQ's default `x-quorum-initial-group-size`: 3
// replicas, whatever the number of members.
const DefaultSize = 3

// ParseLocator reads a locator as a declare argument or policy gives it.
// RabbitMQ 4.x accepts the deprecated "random", "least-leaders" and
// "min-masters" as "balanced"; anything else is refused.
func ParseLocator(s string) (Locator, error) {
	switch s {
	case string(ClientLocal):
		return ClientLocal, nil
	case string(Balanced), "random", "least-leaders", "min-masters":
		return Balanced, nil
	}
	return "", fmt.Errorf("qplace: leader locator %q is not one of client-local, balanced", s)
}

// ResolveLocator picks a queue's locator as RabbitMQ 4.x does
// (rabbit_queue_location): the policy's `queue-leader-locator` over the
// queue's `x-queue-leader-locator` argument over the member's
// `queue_leader_locator` setting; a value none of them gives, or one
// that is not a locator, is client-local.
func ResolveLocator(policy, arg, setting string) Locator {
	for _, s := range []string{policy, arg, setting} {
		if s == "" {
			continue
		}
		if l, err := ParseLocator(s); err == nil {
			return l
		}
		return ClientLocal
	}
	return ClientLocal
}

// Load is what a member carries now: the groups it replicates and the
// groups it leads.
type Load struct {
	Replicas int
	Leaders  int
}

// Placement is a new group's replica set (sorted) and the member that
// should lead it first.
type Placement struct {
	Replicas []uint64
	Leader   uint64
}

// ErrNoMembers is Place's refusal of an empty member list.
var ErrNoMembers = errors.New("qplace: no members to place a group on")

// Place chooses a new group's replicas and first leader, as RabbitMQ 4.x
// places a quorum queue (rabbit_queue_location): with size replicas
// (DefaultSize when 0; every member when there are no more than that),
// the declaring member local first, then the running members with the
// fewest replicas, then the members down, ties broken by the lower id.
// The leader is local for ClientLocal; for Balanced it is the running
// replica leading the fewest groups (ties: the lower id). RabbitMQ
// switches both choices to random past 1,000 queues because counting
// them costs it; the counts here come with load, so Place stays
// deterministic at any size. An even size is allowed, as RabbitMQ
// allows it. live lists the members up (nil: all of them); local must
// be one of members.
func Place(members []uint64, live []uint64, load map[uint64]Load, size int, loc Locator, local uint64) (Placement, error) {
	if len(members) == 0 {
		return Placement{}, ErrNoMembers
	}
	if !slices.Contains(members, local) {
		return Placement{}, fmt.Errorf("qplace: the declaring member %d is not one of the members %v", local, members)
	}
	if size < 0 {
		return Placement{}, fmt.Errorf("qplace: group size %d is negative", size)
	}
	if size == 0 {
		size = DefaultSize
	}
	up := func(m uint64) bool { return live == nil || slices.Contains(live, m) }
	var reps []uint64
	if len(members) <= size {
		reps = slices.Clone(members)
	} else {
		others := make([]uint64, 0, len(members)-1)
		for _, m := range members {
			if m != local {
				others = append(others, m)
			}
		}
		slices.SortFunc(others, func(a, b uint64) int {
			if ua, ub := up(a), up(b); ua != ub {
				if ua {
					return -1
				}
				return 1
			}
			return cmp.Or(cmp.Compare(load[a].Replicas, load[b].Replicas), cmp.Compare(a, b))
		})
		reps = append([]uint64{local}, others[:size-1]...)
	}
	leader := local
	if loc == Balanced {
		cands := make([]uint64, 0, len(reps))
		for _, m := range reps {
			if up(m) {
				cands = append(cands, m)
			}
		}
		if len(cands) == 0 {
			cands = reps
		}
		leader = slices.MinFunc(cands, func(a, b uint64) int {
			return cmp.Or(cmp.Compare(load[a].Leaders, load[b].Leaders), cmp.Compare(a, b))
		})
	}
	slices.Sort(reps)
	reps = slices.Compact(reps)
	return Placement{Replicas: reps, Leader: leader}, nil
}

// Loads counts each member's replicas and leaderships in a View's
// groups.
func Loads(v View) map[uint64]Load {
	out := map[uint64]Load{}
	for _, m := range v.Live {
		out[m] = Load{}
	}
	for _, g := range v.Groups {
		for _, m := range g.Voters {
			l := out[m]
			l.Replicas++
			out[m] = l
		}
		for _, m := range g.Learners {
			l := out[m]
			l.Replicas++
			out[m] = l
		}
		if g.Leader != 0 {
			l := out[g.Leader]
			l.Leaders++
			out[g.Leader] = l
		}
	}
	return out
}

func sortIDs(ids []uint64) { slices.Sort(ids) }
