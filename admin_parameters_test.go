package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	broker "github.com/warrenmq/broker"
	"github.com/warrenmq/broker/definitions"
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
	require.NoError(t, a.RegisterComponent("test-link", func(vhost, name string, v json.RawMessage) error {
		if string(v) == `"bad"` {
			return errors.New("Validation failed\n\nbad value\n")
		}
		return nil
	}))
	require.Error(t, a.RegisterComponent("test-link", func(string, string, json.RawMessage) error { return nil }), "twice")
	require.Error(t, a.RegisterComponent("policy", func(string, string, json.RawMessage) error { return nil }))
	var heard []string
	cancel := a.WatchParameters("test-link", func(vhost, name string) { heard = append(heard, vhost+"/"+name) })
	defer cancel()

	for _, tc := range []struct {
		name    string
		p       broker.Parameter
		created bool
		err     string
	}{
		{"unknown component", broker.Parameter{Component: "no-such-plugin", VHost: "/", Name: "up", Value: json.RawMessage(`{}`)}, false, "Validation failed\n\ncomponent no-such-plugin not found\n"},
		{"refused value", broker.Parameter{Component: "test-link", VHost: "/", Name: "s", Value: json.RawMessage(`"bad"`)}, false, "bad value"},
		{"no vhost", broker.Parameter{Component: "test-link", VHost: "nope", Name: "s", Value: json.RawMessage(`{}`)}, false, "not found"},
		{"created", broker.Parameter{Component: "test-link", VHost: "", Name: "s", Value: json.RawMessage(`{"a":1}`)}, true, ""},
		{"replaced", broker.Parameter{Component: "test-link", VHost: "/", Name: "s", Value: json.RawMessage(`{"a":2}`)}, false, ""},
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
	p, err := a.GetParameter(ctx, "test-link", "/", "s")
	require.NoError(t, err)
	require.JSONEq(t, `{"a":2}`, string(p.Value))
	ps, err := a.ListParameters(ctx, "", "")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.NoError(t, a.DeleteParameter(ctx, "test-link", "/", "s"))
	require.ErrorIs(t, a.DeleteParameter(ctx, "test-link", "/", "s"), meta.ErrNotFound)
	_, err = a.GetParameter(ctx, "test-link", "/", "s")
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

// TestParametersDefinitions: a file's parameters of a registered component
// and its global parameters import and export in RabbitMQ's shape; one of
// an unregistered component fails the checks and changes nothing.
func TestParametersDefinitions(t *testing.T) {
	ctx := context.Background()
	const file = `{"vhosts":[{"name":"/"}],
	 "parameters":[{"value":{"src-uri":"amqp://","src-queue":"a"},"vhost":"/","component":"test-link","name":"s1"}],
	 "global_parameters":[{"name":"cluster_name","value":"rabbit@x"}]}`
	for _, tc := range []struct {
		name     string
		register bool
		err      string
	}{
		{"registered", true, ""},
		{"unregistered", false, `parameter "s1" of component "test-link" in vhost "/": component test-link not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := broker.New(broker.Options{})
			require.NoError(t, err)
			defer b.Close()
			a := b.Admin()
			if tc.register {
				require.NoError(t, a.RegisterComponent("test-link", func(string, string, json.RawMessage) error { return nil }))
			}
			d, err := definitions.Read(strings.NewReader(file))
			require.NoError(t, err)
			err = a.Import(ctx, d)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				gs, err := a.ListGlobalParameters(ctx)
				require.NoError(t, err)
				require.Empty(t, gs, "a file that fails a check changes nothing")
				return
			}
			require.NoError(t, err)
			out, err := a.Export(ctx)
			require.NoError(t, err)
			raw, err := json.Marshal(struct {
				P any `json:"parameters"`
				G any `json:"global_parameters"`
			}{out.Parameters, out.GlobalParameters})
			require.NoError(t, err)
			require.JSONEq(t, `{"parameters":[{"value":{"src-uri":"amqp://","src-queue":"a"},"vhost":"/","component":"test-link","name":"s1"}],
			 "global_parameters":[{"name":"cluster_name","value":"rabbit@x"}]}`, string(raw))
		})
	}
}
