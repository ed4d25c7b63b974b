package qplace

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/multiraft"
)

func TestParseLocator(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Locator
		err  bool
	}{
		{"client-local", ClientLocal, false},
		{"balanced", Balanced, false},
		{"random", Balanced, false},
		{"least-leaders", Balanced, false},
		{"min-masters", Balanced, false},
		{"", "", true},
		{"Balanced", "", true},
		{"leader-local", "", true},
	} {
		got, err := ParseLocator(tc.in)
		if tc.err {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

func TestResolveLocator(t *testing.T) {
	for _, tc := range []struct {
		policy, arg, setting string
		want                 Locator
	}{
		{"", "", "", ClientLocal},
		{"", "", "balanced", Balanced},
		{"", "balanced", "client-local", Balanced},
		{"client-local", "balanced", "balanced", ClientLocal}, // the policy wins over the argument
		{"", "", "nonsense", ClientLocal},
		{"", "least-leaders", "", Balanced},
	} {
		require.Equal(t, tc.want, ResolveLocator(tc.policy, tc.arg, tc.setting), "%+v", tc)
	}
}

func TestPlace(t *testing.T) {
	five := []uint64{1, 2, 3, 4, 5}
	load := map[uint64]Load{1: {9, 5}, 2: {3, 1}, 3: {7, 0}, 4: {3, 4}, 5: {8, 2}}
	for _, tc := range []struct {
		name    string
		members []uint64
		live    []uint64
		size    int
		loc     Locator
		local   uint64
		want    Placement
	}{
		{"default size, client-local", five, nil, 0, ClientLocal, 1, Placement{[]uint64{1, 2, 4}, 1}},
		{"balanced picks the replica leading fewest", five, nil, 3, Balanced, 1, Placement{[]uint64{1, 2, 4}, 2}},
		{"fewer members than the size", []uint64{1, 2}, nil, 3, ClientLocal, 2, Placement{[]uint64{1, 2}, 2}},
		{"members down go last", five, []uint64{1, 3, 4, 5}, 3, ClientLocal, 1, Placement{[]uint64{1, 3, 4}, 1}},
		{"balanced skips a replica that is down", five, []uint64{1, 3, 4}, 4, Balanced, 4, Placement{[]uint64{1, 2, 3, 4}, 3}},
		{"even size allowed", five, nil, 4, ClientLocal, 5, Placement{[]uint64{2, 3, 4, 5}, 5}},
		{"size 1 is the local member", five, nil, 1, Balanced, 3, Placement{[]uint64{3}, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Place(tc.members, tc.live, load, tc.size, tc.loc, tc.local)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := Place(nil, nil, nil, 3, ClientLocal, 1)
	require.ErrorIs(t, err, ErrNoMembers)
	_, err = Place(five, nil, nil, 3, ClientLocal, 9)
	require.Error(t, err)
	_, err = Place(five, nil, nil, -1, ClientLocal, 1)
	require.Error(t, err)
}

// TestPlaceSpreads places 30 groups one after the other on 3 and on 5
// members with the counts growing as they are placed: replicas and
// leaders end up even.
func TestPlaceSpreads(t *testing.T) {
	for _, n := range []int{3, 5} {
		var members []uint64
		for i := 1; i <= n; i++ {
			members = append(members, uint64(i))
		}
		var v View
		v.Live = members
		for i := range 30 {
			p, err := Place(members, nil, Loads(v), 3, Balanced, members[i%n])
			require.NoError(t, err)
			v.Groups = append(v.Groups, multiraft.GroupInfo{ID: uint64(i + 1), Leader: p.Leader, Voters: p.Replicas})
		}
		loads := Loads(v)
		for _, m := range members {
			require.LessOrEqual(t, loads[m].Leaders, Limit(30, n), "members %d: %v", n, loads)
			require.LessOrEqual(t, loads[m].Replicas, 90/n+1, "members %d: %v", n, loads)
		}
	}
}

func TestPlanMoves(t *testing.T) {
	all := []uint64{1, 2, 3}
	g := func(id, leader uint64, current ...uint64) multiraft.GroupInfo {
		return multiraft.GroupInfo{ID: id, Leader: leader, Voters: all, Current: current}
	}
	// Member 1 leads 5 of 6 groups, member 3 came back leading none.
	v := View{Live: all, Groups: []multiraft.GroupInfo{
		g(1, 1, 2, 3), g(2, 1, 2, 3), g(3, 1, 2), g(4, 1, 2, 3), g(5, 1, 2, 3), g(6, 2),
	}}
	// Ties go to the lower id: 3 (none), then 2 (one each), then 3.
	require.Equal(t, []Move{{1, 3}, {2, 2}, {4, 3}}, PlanMoves(v, 1))
	require.Empty(t, PlanMoves(v, 2), "member 2 leads no more than its share")
	require.Empty(t, PlanMoves(View{Live: []uint64{1, 2}, Groups: v.Groups}, 3), "a member not live plans nothing")

	// Nobody current to take over: no move.
	stuck := View{Live: all, Groups: []multiraft.GroupInfo{g(1, 1), g(2, 1), g(3, 1)}}
	require.Empty(t, PlanMoves(stuck, 1))
	// A dead member is never a target even when listed current.
	dead := View{Live: []uint64{1, 2}, Groups: []multiraft.GroupInfo{g(1, 1, 3), g(2, 1, 3), g(3, 1, 2, 3), g(4, 1, 2, 3)}}
	require.Equal(t, []Move{{3, 2}, {4, 2}}, PlanMoves(dead, 1))
}

func TestPlanGrowShrink(t *testing.T) {
	gs := []multiraft.GroupInfo{
		{ID: 1, Voters: []uint64{1, 2, 3}},
		{ID: 2, Voters: []uint64{1, 2}},
		{ID: 3, Voters: []uint64{2, 4}},
		{ID: 4, Voters: []uint64{4}},
		{ID: 5, Voters: []uint64{1, 2}, Learners: []uint64{4}},
	}
	require.Equal(t, []uint64{1, 2}, PlanGrow(gs, 4, GrowAll))
	require.Equal(t, []uint64{2}, PlanGrow(gs, 4, GrowEven))
	require.Equal(t, []uint64{4}, PlanGrow(gs, 2, GrowAll))
	remove, refused := PlanShrink(gs, 4)
	require.Equal(t, []uint64{3, 5}, remove)
	require.Equal(t, []uint64{4}, refused)
	_, err := ParseGrowStrategy("odd")
	require.Error(t, err)
	s, err := ParseGrowStrategy("even")
	require.NoError(t, err)
	require.Equal(t, GrowEven, s)
}

func TestLimit(t *testing.T) {
	require.Equal(t, 11, Limit(30, 3))
	require.Equal(t, 7, Limit(30, 5))
	require.Equal(t, 2, Limit(1, 3))
	require.Equal(t, 4, Limit(4, 0))
}
