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
	val := func(n int) json.RawMessage { return json.RawMessage(`{"priority":` + string(rune('0'+n)) + `}`) }
	put := []meta.Policy{
		{VHost: "/", Name: "b", Value: val(1)},
		{VHost: "/", Name: "a", Value: val(2)},
		{VHost: "/", Name: "a", Operator: true, Value: val(3)},
		{VHost: "other", Name: "a", Value: val(4)},
		{VHost: "/", Name: "gone", Value: val(5)},
	}
	for _, p := range put {
		require.NoError(t, ps.PutPolicy(ctx, p))
	}
	require.NoError(t, ps.PutPolicy(ctx, meta.Policy{VHost: "/", Name: "b", Value: val(6)}))
	require.NoError(t, ps.DeletePolicy(ctx, "/", "gone", false))
	require.NoError(t, ps.DeletePolicy(ctx, "/", "never", true), "a missing policy is not an error")
	want := []meta.Policy{
		{VHost: "/", Name: "a", Value: val(2)},
		{VHost: "/", Name: "b", Value: val(6)},
		{VHost: "/", Name: "a", Operator: true, Value: val(3)},
	}
	check := func(s meta.Store) {
		got, err := s.(meta.Policies).ListPolicies(ctx, "/")
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for i := range want {
			require.Equal(t, want[i].Name, got[i].Name)
			require.Equal(t, want[i].Operator, got[i].Operator)
			require.JSONEq(t, string(want[i].Value), string(got[i].Value))
		}
		other, err := s.(meta.Policies).ListPolicies(ctx, "other")
		require.NoError(t, err)
		require.Len(t, other, 1)
		none, err := s.(meta.Policies).ListPolicies(ctx, "nowhere")
		require.NoError(t, err)
		require.Empty(t, none)
	}
	check(s)
	if reopen != nil {
		check(reopen())
	}
}
