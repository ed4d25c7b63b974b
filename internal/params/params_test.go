package params

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
)

func TestRegister(t *testing.T) {
	var r Registry
	ok := func(vhost, name string, value json.RawMessage) error { return nil }
	for _, c := range []string{"", "policy", "operator_policy", "vhost-limits"} {
		require.ErrorContains(t, r.Register(c, ok), "cannot be registered", c)
	}
	require.ErrorContains(t, r.Register("shovel", nil), "nil validator")
	require.NoError(t, r.Register("shovel", ok))
	require.ErrorContains(t, r.Register("shovel", ok), "already registered")
}

func TestParameters(t *testing.T) {
	ctx := context.Background()
	st := metamemory.New()
	require.NoError(t, st.PutVHost(ctx, meta.VHost{Name: "/"}))
	r := Registry{Store: st}
	require.NoError(t, r.Register("shovel", func(vhost, name string, value json.RawMessage) error {
		if string(value) == `"bad"` {
			return errors.New("Validation failed\n\nbad value\n")
		}
		return nil
	}))
	var told []string
	cancel := r.Watch("shovel", func(vhost, name string) { told = append(told, vhost+" "+name) })

	cases := []struct {
		name    string
		p       meta.Parameter
		wantErr string
		created bool
	}{
		{"unknown component", meta.Parameter{Component: "nope", Name: "x", Value: json.RawMessage(`1`)}, "Validation failed\n\ncomponent nope not found\n", false},
		{"not JSON", meta.Parameter{Component: "shovel", Name: "x", Value: json.RawMessage(`{`)}, "value is not JSON", false},
		{"refused by the component", meta.Parameter{Component: "shovel", Name: "x", Value: json.RawMessage(`"bad"`)}, "bad value", false},
		{"no such vhost", meta.Parameter{Component: "shovel", VHost: "gone", Name: "x", Value: json.RawMessage(`1`)}, `vhost "gone"`, false},
		{"new", meta.Parameter{Component: "shovel", Name: "x", Value: json.RawMessage(`1`)}, "", true},
		{"replaced", meta.Parameter{Component: "shovel", VHost: "/", Name: "x", Value: json.RawMessage(`2`)}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			created, err := r.Put(ctx, tc.p)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.created, created)
		})
	}
	_, err := r.Put(ctx, meta.Parameter{Component: "nope", Name: "x", Value: json.RawMessage(`1`)})
	require.ErrorIs(t, err, ErrUnknownComponent)

	p, err := r.Get(ctx, "shovel", "", "x")
	require.NoError(t, err)
	require.JSONEq(t, `2`, string(p.Value))
	require.NoError(t, r.Delete(ctx, "shovel", "/", "x"))
	require.ErrorIs(t, r.Delete(ctx, "shovel", "/", "x"), meta.ErrNotFound)
	require.Equal(t, []string{"/ x", "/ x", "/ x"}, told, "two puts and a delete")
	cancel()
	_, err = r.Put(ctx, meta.Parameter{Component: "shovel", Name: "y", Value: json.RawMessage(`1`)})
	require.NoError(t, err)
	require.Len(t, told, 3, "no call after cancel")
}

func TestGlobalParameters(t *testing.T) {
	ctx := context.Background()
	r := Registry{Store: metamemory.New()}
	_, err := r.PutGlobal(ctx, meta.GlobalParameter{Value: json.RawMessage(`1`)})
	require.ErrorContains(t, err, "needs a name")
	_, err = r.PutGlobal(ctx, meta.GlobalParameter{Name: "cluster_name", Value: json.RawMessage(`{`)})
	require.ErrorContains(t, err, "not JSON")
	created, err := r.PutGlobal(ctx, meta.GlobalParameter{Name: "cluster_name", Value: json.RawMessage(`"a"`)})
	require.NoError(t, err)
	require.True(t, created)
	created, err = r.PutGlobal(ctx, meta.GlobalParameter{Name: "cluster_name", Value: json.RawMessage(`"b"`)})
	require.NoError(t, err)
	require.False(t, created)
	g, err := r.GetGlobal(ctx, "cluster_name")
	require.NoError(t, err)
	require.JSONEq(t, `"b"`, string(g.Value))
	require.NoError(t, r.DeleteGlobal(ctx, "cluster_name"))
	require.ErrorIs(t, r.DeleteGlobal(ctx, "cluster_name"), meta.ErrNotFound)
}
