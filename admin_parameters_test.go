package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	broker "github.com/warrenmq/broker"
	"github.com/warrenmq/broker/meta"
)

// TestAdminParameters: an unknown component is refused with RabbitMQ's
// text, a registered one goes through its validator, Put reports
// creation, watchers hear puts and deletes, and a missing parameter is
// ErrNotFound.
func TestAdminParameters(t *testing.T) {
	ctx := context.Background()
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	defer b.Close()
	a := b.Admin()
	require.NoError(t, a.RegisterComponent("shovel", func(vhost, name string, v json.RawMessage) error {
		if string(v) == `"bad"` {
			return errors.New("Validation failed\n\nbad value\n")
		}
		return nil
	}))
	require.Error(t, a.RegisterComponent("shovel", func(string, string, json.RawMessage) error { return nil }), "twice")
	require.Error(t, a.RegisterComponent("policy", func(string, string, json.RawMessage) error { return nil }))
	var heard []string
	cancel := a.WatchParameters("shovel", func(vhost, name string) { heard = append(heard, vhost+"/"+name) })
	defer cancel()

	for _, tc := range []struct {
		name    string
		p       broker.Parameter
		created bool
		err     string
	}{
		{"unknown component", broker.Parameter{Component: "federation-upstream", VHost: "/", Name: "up", Value: json.RawMessage(`{}`)}, false, "Validation failed\n\ncomponent federation-upstream not found\n"},
		{"refused value", broker.Parameter{Component: "shovel", VHost: "/", Name: "s", Value: json.RawMessage(`"bad"`)}, false, "bad value"},
		{"no vhost", broker.Parameter{Component: "shovel", VHost: "nope", Name: "s", Value: json.RawMessage(`{}`)}, false, "not found"},
		{"created", broker.Parameter{Component: "shovel", VHost: "", Name: "s", Value: json.RawMessage(`{"a":1}`)}, true, ""},
		{"replaced", broker.Parameter{Component: "shovel", VHost: "/", Name: "s", Value: json.RawMessage(`{"a":2}`)}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			created, err := a.PutParameter(ctx, tc.p)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.created, created)
		})
	}
	p, err := a.GetParameter(ctx, "shovel", "/", "s")
	require.NoError(t, err)
	require.JSONEq(t, `{"a":2}`, string(p.Value))
	ps, err := a.ListParameters(ctx, "", "")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.NoError(t, a.DeleteParameter(ctx, "shovel", "/", "s"))
	require.ErrorIs(t, a.DeleteParameter(ctx, "shovel", "/", "s"), meta.ErrNotFound)
	_, err = a.GetParameter(ctx, "shovel", "/", "s")
	require.ErrorIs(t, err, meta.ErrNotFound)
	require.Equal(t, []string{"//s", "//s", "//s"}, heard)

	created, err := a.PutGlobalParameter(ctx, broker.GlobalParameter{Name: "cluster_name", Value: json.RawMessage(`"c"`)})
	require.NoError(t, err)
	require.True(t, created)
	g, err := a.GetGlobalParameter(ctx, "cluster_name")
	require.NoError(t, err)
	require.JSONEq(t, `"c"`, string(g.Value))
	require.NoError(t, a.DeleteGlobalParameter(ctx, "cluster_name"))
	require.ErrorIs(t, a.DeleteGlobalParameter(ctx, "cluster_name"), meta.ErrNotFound)
}
