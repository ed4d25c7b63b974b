package metatest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// RunParameters checks a store's meta.Parameters: put, replace, delete,
// every filter of ListParameters (by component, by vhost, by both, none)
// and its order, global parameters, and that a vhost or component name
// that is a prefix of another does not select the other. reopen, when not
// nil, reopens the store on the same data: what was stored must come back.
func RunParameters(t *testing.T, s meta.Store, reopen func() meta.Store) {
	ctx := context.Background()
	v := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, p := range []meta.Parameter{
		{Component: "shovel", VHost: "/", Name: "b", Value: v(`{"src-uri":"amqp://"}`)},
		{Component: "shovel", VHost: "/", Name: "a", Value: v(`1`)},
		{Component: "shovel", VHost: "/x", Name: "a", Value: v(`2`)},
		{Component: "shovel2", VHost: "/", Name: "a", Value: v(`3`)},
		{Component: "federation-upstream", VHost: "/", Name: "up", Value: v(`{"uri":"amqp://x"}`)},
		{Component: "shovel", VHost: "/", Name: "gone", Value: v(`4`)},
	} {
		require.NoError(t, s.PutParameter(ctx, p))
	}
	require.NoError(t, s.PutParameter(ctx, meta.Parameter{Component: "shovel", VHost: "/", Name: "a", Value: v(`5`)}), "replace")
	require.NoError(t, s.DeleteParameter(ctx, "shovel", "/", "gone"))
	require.NoError(t, s.DeleteParameter(ctx, "shovel", "/", "never"), "a missing parameter is not an error")
	for _, g := range []meta.GlobalParameter{{Name: "cluster_name", Value: v(`"c1"`)}, {Name: "a", Value: v(`{}`)}, {Name: "gone", Value: v(`0`)}} {
		require.NoError(t, s.PutGlobalParameter(ctx, g))
	}
	require.NoError(t, s.DeleteGlobalParameter(ctx, "gone"))
	require.NoError(t, s.DeleteGlobalParameter(ctx, "never"))

	key := func(ps []meta.Parameter) (out []string) {
		for _, p := range ps {
			out = append(out, p.Component+"|"+p.VHost+"|"+p.Name+"="+string(p.Value))
		}
		return out
	}
	check := func(s meta.Store) {
		for _, tc := range []struct {
			component, vhost string
			want             []string
		}{
			{"shovel", "/", []string{"shovel|/|a=5", `shovel|/|b={"src-uri":"amqp://"}`}},
			{"shovel", "/x", []string{"shovel|/x|a=2"}},
			{"shovel", "", []string{"shovel|/|a=5", `shovel|/|b={"src-uri":"amqp://"}`, "shovel|/x|a=2"}},
			{"", "/", []string{`federation-upstream|/|up={"uri":"amqp://x"}`, "shovel|/|a=5", `shovel|/|b={"src-uri":"amqp://"}`, "shovel2|/|a=3"}},
			{"", "", []string{`federation-upstream|/|up={"uri":"amqp://x"}`, "shovel|/|a=5", `shovel|/|b={"src-uri":"amqp://"}`, "shovel|/x|a=2", "shovel2|/|a=3"}},
			{"nothing", "", nil},
			{"shovel", "nowhere", nil},
		} {
			got, err := s.ListParameters(ctx, tc.component, tc.vhost)
			require.NoError(t, err)
			require.Equal(t, tc.want, key(got), "ListParameters(%q, %q)", tc.component, tc.vhost)
		}
		gs, err := s.ListGlobalParameters(ctx)
		require.NoError(t, err)
		require.Len(t, gs, 2)
		require.Equal(t, "a", gs[0].Name)
		require.Equal(t, "cluster_name", gs[1].Name)
		require.JSONEq(t, `"c1"`, string(gs[1].Value))
	}
	check(s)
	if reopen != nil {
		check(reopen())
	}
}
