package limits

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	metamemory "github.com/warrenmq/broker/meta/memory"
)

func TestAdmit(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		max     int
		vhost   map[string]int
		stored  int64 // max-connections stored for "/"; 0: none
		network bool
		admit   int    // how many are admitted before the refusal
		refusal string // "" when none is refused within admit+1
	}{
		{"no limit", 0, nil, 0, true, 5, ""},
		{"broker-wide", 2, nil, 0, true, 2, "node connection limit (2) is reached"},
		{"broker-wide spares direct Channels", 2, nil, 0, false, 5, ""},
		{"vhost", 0, map[string]int{"/": 1}, 0, true, 1, "connection limit (1) is reached"},
		{"vhost zero", 0, map[string]int{"/": 0}, 0, false, 0, "connection limit (0) is reached"},
		{"vhost negative", 0, map[string]int{"/": -1}, 0, true, 5, ""},
		{"stored overrides configured", 0, map[string]int{"/": 1}, 3, true, 3, "connection limit (3) is reached"},
		{"stored negative is none", 0, map[string]int{"/": 1}, -1, true, 5, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &Limits{Store: metamemory.New(), MaxConnections: tc.max, VHostMaxConnections: tc.vhost}
			if tc.stored != 0 {
				require.NoError(t, l.Put(ctx, "/", MaxConnections, tc.stored))
			}
			var releases []func()
			for range tc.admit {
				release, err := l.Admit("guest", "/", tc.network)
				require.Nil(t, err)
				releases = append(releases, release)
			}
			_, err := l.Admit("guest", "/", tc.network)
			if tc.refusal == "" {
				require.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			require.Contains(t, err.Error(), tc.refusal)
			if len(releases) > 0 {
				releases[0]()
				_, err := l.Admit("guest", "/", tc.network)
				require.Nil(t, err, "a released slot is free again")
			}
		})
	}
}

func TestStoredLimits(t *testing.T) {
	ctx := context.Background()
	st := metamemory.New()
	l := &Limits{Store: st}
	require.ErrorContains(t, CheckName("max-channels"), `unknown vhost limit "max-channels"`)
	require.NoError(t, l.Put(ctx, "/", MaxQueues, 7))
	require.NoError(t, l.Put(ctx, "other", MaxConnections, 2))
	n, ok := l.Get("/", MaxQueues)
	require.True(t, ok)
	require.EqualValues(t, 7, n)

	again := &Limits{Store: st}
	require.NoError(t, again.Load(ctx))
	require.Equal(t, map[string]map[string]int64{"/": {MaxQueues: 7}, "other": {MaxConnections: 2}}, again.All())

	require.NoError(t, again.Delete(ctx, "/", MaxQueues))
	require.NoError(t, again.Delete(ctx, "/", MaxQueues), "deleting a limit the vhost does not have is not an error")
	require.NoError(t, again.DropVHost(ctx, "other"))
	require.Empty(t, again.All())
	stored, err := st.ListVHostLimits(ctx)
	require.NoError(t, err)
	require.Empty(t, stored)
}
