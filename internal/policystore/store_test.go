package policystore

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/policy"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
)

// target is an open vhost that records the sets it was given.
type target struct{ sets []*policy.Set }

func (t *target) SetPolicies(s *policy.Set) { t.sets = append(t.sets, s) }

func (t *target) last() *policy.Set {
	if len(t.sets) == 0 {
		return nil
	}
	return t.sets[len(t.sets)-1]
}

// keeper is a Keeper over a memory store with vhosts "/" and "v" open.
func keeper(t *testing.T) (*Keeper, *metamemory.Store, map[string]*target) {
	t.Helper()
	st := metamemory.New()
	open := map[string]*target{"/": {}, "v": {}}
	k := &Keeper{
		Store: st,
		Log:   slog.New(slog.DiscardHandler),
		VHost: func(name string) (Target, bool) {
			tg, ok := open[name]
			return tg, ok
		},
		VHosts: func() []string { return []string{"/", "v"} },
	}
	return k, st, open
}

func def(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// TestPutRefuses: a policy on a vhost not open wraps meta.ErrNotFound;
// one RabbitMQ would refuse is a *policy.ValidationError with RabbitMQ's
// words; neither is stored nor applied.
func TestPutRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        meta.Policy
		operator bool
		notFound bool
		problem  string
	}{
		{"vhost not open", meta.Policy{VHost: "gone", Name: "p", Pattern: ".*", Definition: def("max-length", 1)}, false, true, ""},
		{"empty name", meta.Policy{Name: "", Pattern: ".*", Definition: def("max-length", 1)}, false, false, "policy name must not be empty"},
		{"unknown key", meta.Policy{Name: "p", Pattern: ".*", Definition: def("colour", "red")}, false, false, `[{<<"colour">>,<<"red">>}] are not recognised policy settings`},
		{"bad value", meta.Policy{Name: "p", Pattern: ".*", Definition: def("max-length", -1)}, false, false, "-1 is not a valid maximum length"},
		{"no definition", meta.Policy{Name: "p", Pattern: ".*"}, false, false, `Key "definition" not found`},
		{"key an operator policy may not set", meta.Policy{Name: "p", Pattern: ".*", Definition: def("dead-letter-exchange", "dlx")}, true, false, `[{<<"dead-letter-exchange">>,<<"dlx">>}] are not recognised policy settings`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, st, open := keeper(t)
			created, err := k.Put(context.Background(), tc.p, tc.operator)
			require.Error(t, err)
			require.False(t, created)
			if tc.notFound {
				require.ErrorIs(t, err, meta.ErrNotFound)
			} else {
				var ve *policy.ValidationError
				require.ErrorAs(t, err, &ve)
				require.Contains(t, ve.Problems, tc.problem)
			}
			for _, vh := range []string{"/", "v"} {
				stored, err := st.ListPolicies(context.Background(), vh, tc.operator)
				require.NoError(t, err)
				require.Empty(t, stored, "nothing stored")
				require.Empty(t, open[vh].sets, "nothing applied")
			}
		})
	}
}

// TestResolution: the set a put hands the vhost resolves, per object, the
// highest-priority matching policy (equal priorities by name), matching
// the pattern unanchored and only the kinds apply-to names, with the
// matching operator policy merged in (the lesser of numeric limits, else
// the operator's value), as RabbitMQ 4.x's rabbit_policy does.
func TestResolution(t *testing.T) {
	k, _, open := keeper(t)
	ctx := context.Background()
	for _, p := range []struct {
		p        meta.Policy
		operator bool
	}{
		{meta.Policy{Name: "all-low", Pattern: ".*", Priority: 0, Definition: def("max-length", 100)}, false},
		{meta.Policy{Name: "orders", Pattern: "^orders", ApplyTo: "queues", Priority: 5, Definition: def("max-length", 50, "message-ttl", 60000)}, false},
		{meta.Policy{Name: "b-tie", Pattern: "tie", Priority: 7, Definition: def("max-length", 2)}, false},
		{meta.Policy{Name: "a-tie", Pattern: "tie", Priority: 7, Definition: def("max-length", 1)}, false},
		{meta.Policy{Name: "ex", Pattern: `^orders\.ex$`, ApplyTo: "exchanges", Priority: 9, Definition: def("alternate-exchange", "ae")}, false},
		{meta.Policy{Name: "streams", Pattern: "log", ApplyTo: "streams", Priority: 9, Definition: def("max-age", "1D")}, false},
		{meta.Policy{Name: "cap", Pattern: ".*", ApplyTo: "queues", Definition: def("message-ttl", 1000, "max-length", 70)}, true},
	} {
		created, err := k.Put(ctx, p.p, p.operator)
		require.NoError(t, err, p.p.Name)
		require.True(t, created)
	}
	s := open["/"].last()
	require.NotNil(t, s)
	require.Empty(t, open["v"].sets, "only the policy's vhost is given a set")
	for _, tc := range []struct {
		name             string
		kind             policy.Target
		object           string
		policy, operator string
		definition       map[string]any
	}{
		{"higher priority wins", policy.ClassicQueue, "orders.eu", "orders", "cap", def("max-length", int64(50), "message-ttl", int64(1000))},
		{"pattern is unanchored", policy.ClassicQueue, "my-orders", "all-low", "cap", def("max-length", int64(70), "message-ttl", int64(1000))},
		{"equal priorities by name", policy.QuorumQueue, "tie", "a-tie", "cap", def("max-length", int64(1), "message-ttl", int64(1000))},
		{"apply-to exchanges", policy.Exchange, "orders.ex", "ex", "", def("alternate-exchange", "ae")},
		{"apply-to queues skips exchanges", policy.Exchange, "orders.q", "all-low", "", def("max-length", int64(100))},
		{"apply-to exchanges skips queues", policy.ClassicQueue, "orders.ex", "orders", "cap", def("max-length", int64(50), "message-ttl", int64(1000))},
		{"apply-to streams", policy.Stream, "log", "streams", "cap", def("max-age", "1D", "message-ttl", int64(1000), "max-length", int64(70))},
		{"apply-to streams skips classic queues", policy.ClassicQueue, "log", "all-low", "cap", def("max-length", int64(70), "message-ttl", int64(1000))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := s.Match(tc.kind, tc.object)
			p, op := m.Names()
			require.Equal(t, tc.policy, p)
			require.Equal(t, tc.operator, op)
			require.Equal(t, tc.definition, m.Definition())
		})
	}
}

// TestPutDeleteApply: a put reports whether it created the policy and
// applies the vhost's whole set at once; a delete of a missing policy
// wraps meta.ErrNotFound, and deleting the last one applies no set; a
// policy and an operator policy of one name are apart.
func TestPutDeleteApply(t *testing.T) {
	k, _, open := keeper(t)
	ctx := context.Background()
	p := meta.Policy{VHost: "", Name: "p", Pattern: ".*", Definition: def("max-length", 1)}
	created, err := k.Put(ctx, p, false)
	require.NoError(t, err)
	require.True(t, created, "new")
	p.Definition = def("max-length", 2)
	created, err = k.Put(ctx, p, false)
	require.NoError(t, err)
	require.False(t, created, "replaced")
	created, err = k.Put(ctx, meta.Policy{Name: "p", Pattern: ".*", Definition: def("max-length", 3)}, true)
	require.NoError(t, err)
	require.True(t, created, "an operator policy of the same name is another policy")
	require.Len(t, open["/"].sets, 3, "each change applied")
	m := open["/"].last().Match(policy.ClassicQueue, "q")
	require.Equal(t, def("max-length", int64(2)), m.Policy.Definition, "the replacement applies")

	require.ErrorIs(t, k.Delete(ctx, "/", "missing", false), meta.ErrNotFound)
	require.NoError(t, k.Delete(ctx, "/", "p", false))
	pol, op := open["/"].last().Match(policy.ClassicQueue, "q").Names()
	require.Equal(t, []string{"", "p"}, []string{pol, op}, "the operator policy stays")
	require.NoError(t, k.Delete(ctx, "", "p", true))
	require.Nil(t, open["/"].last(), "no policy left: no set")
}

// TestStoredRefusedSkipped: a stored policy that no longer passes the
// checks (written by another version) is skipped by List and Set, never
// applied half; Reload applies what another broker stored; List of ""
// reads every open vhost; DropVHost removes both kinds.
func TestStoredRefusedSkipped(t *testing.T) {
	k, st, open := keeper(t)
	ctx := context.Background()
	require.NoError(t, st.PutPolicy(ctx, meta.Policy{VHost: "v", Name: "bad", Pattern: ".*", ApplyTo: "all", Definition: def("colour", "red")}, false))
	require.NoError(t, st.PutPolicy(ctx, meta.Policy{VHost: "v", Name: "good", Pattern: ".*", ApplyTo: "all", Definition: def("max-length", 1)}, false))
	require.NoError(t, st.PutPolicy(ctx, meta.Policy{VHost: "/", Name: "root", Pattern: ".*", ApplyTo: "all", Definition: def("max-length", 1)}, false))
	require.NoError(t, st.PutPolicy(ctx, meta.Policy{VHost: "v", Name: "op", Pattern: ".*", ApplyTo: "all", Definition: def("max-length", 5)}, true))

	ps, err := k.List(ctx, "v", false)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "good", ps[0].Name)
	all, err := k.List(ctx, "", false)
	require.NoError(t, err)
	require.Len(t, all, 2, "every open vhost's")

	require.True(t, k.Reload(ctx, "v"))
	s := open["v"].last()
	require.NotNil(t, s)
	names := func(cs []*policy.Compiled) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	require.Equal(t, []string{"good"}, names(s.Policies(false)))
	require.Equal(t, []string{"op"}, names(s.Policies(true)))
	require.True(t, k.Reload(ctx, "closed"), "a vhost not open has nothing to apply")

	for _, err := range k.DropVHost(ctx, "v") {
		require.NoError(t, err)
	}
	for _, operator := range []bool{false, true} {
		left, err := st.ListPolicies(ctx, "v", operator)
		require.NoError(t, err)
		require.Empty(t, left)
	}
	left, err := st.ListPolicies(ctx, "/", false)
	require.NoError(t, err)
	require.Len(t, left, 1, "other vhosts keep theirs")
}
