package metatest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// RunPolicies checks a store's meta.Policies: put, replace, list (each
// kind by name, policies first, one vhost at a time), delete, and that a
// policy and an operator policy of the same name are two records. reopen,
// when not nil, reopens the store on the same data: what was stored must
// come back.
func RunPolicies(t *testing.T, s meta.Store, reopen func() meta.Store) {
	ctx := context.Background()
	ps, ok := s.(meta.Policies)
	require.True(t, ok, "%T does not implement meta.Policies", s)
	pol := func(vhost, name string, n int) meta.Policy {
		return meta.Policy{VHost: vhost, Name: name, Pattern: "^q", ApplyTo: "queues", Priority: n,
			Definition: map[string]any{"max-length": n, "queue-mode": "lazy"}}
	}
	put := []struct {
		p        meta.Policy
		operator bool
	}{
		{pol("/", "b", 1), false},
		{pol("/", "a", 2), false},
		{pol("/", "a", 3), true},
		{pol("other", "a", 4), false},
		{pol("/", "gone", 5), false},
	}
	for _, p := range put {
		require.NoError(t, ps.PutPolicy(ctx, p.p, p.operator))
	}
	require.NoError(t, ps.PutPolicy(ctx, pol("/", "b", 6), false))
	require.NoError(t, ps.DeletePolicy(ctx, "/", "gone", false))
	require.NoError(t, ps.DeletePolicy(ctx, "/", "never", true), "a missing policy is not an error")
	check := func(s meta.Store) {
		for _, tc := range []struct {
			vhost    string
			operator bool
			want     []meta.Policy
		}{
			{"/", false, []meta.Policy{pol("/", "a", 2), pol("/", "b", 6)}},
			{"/", true, []meta.Policy{pol("/", "a", 3)}},
			{"other", false, []meta.Policy{pol("other", "a", 4)}},
			{"other", true, nil},
			{"nowhere", false, nil},
		} {
			got, err := s.(meta.Policies).ListPolicies(ctx, tc.vhost, tc.operator)
			require.NoError(t, err)
			require.Len(t, got, len(tc.want), "%s operator=%v", tc.vhost, tc.operator)
			for i, w := range tc.want {
				g := got[i]
				require.Equal(t, []any{w.VHost, w.Name, w.Pattern, w.ApplyTo, w.Priority}, []any{g.VHost, g.Name, g.Pattern, g.ApplyTo, g.Priority})
				wj, err := json.Marshal(w.Definition)
				require.NoError(t, err)
				gj, err := json.Marshal(g.Definition)
				require.NoError(t, err)
				require.JSONEq(t, string(wj), string(gj))
			}
		}
	}
	check(s)
	if reopen != nil {
		check(reopen())
	}
}
