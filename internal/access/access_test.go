package access

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

func TestCompileTopicGrant(t *testing.T) {
	cases := []struct {
		name        string
		p           meta.TopicPermission
		key         string
		write, read bool
	}{
		{"unanchored", meta.TopicPermission{Write: "a", Read: "b"}, "xax", true, false},
		{"empty matches only the empty key", meta.TopicPermission{}, "", true, true},
		{"empty refuses a key", meta.TopicPermission{}, "k", false, false},
		{"username and vhost expanded", meta.TopicPermission{User: "alice", VHost: "v1", Write: "^{username}\\.{vhost}$", Read: ".*"}, "alice.v1", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := CompileTopicGrant(tc.p)
			require.NoError(t, err)
			require.Equal(t, tc.write, g.Write.MatchString(tc.key))
			require.Equal(t, tc.read, g.Read.MatchString(tc.key))
		})
	}
	_, err := CompileTopicGrant(meta.TopicPermission{Write: "("})
	require.ErrorContains(t, err, `topic write permission "("`)
}

func TestRegistry(t *testing.T) {
	var r Registry
	g, err := CompileGrant(meta.Permission{Configure: ".*", Write: ".*", Read: ".*"})
	require.NoError(t, err)
	a := r.Shared("alice", "/", g)
	require.Same(t, a, r.Shared("alice", "/", g), "one Access per (user, vhost)")
	b := r.Shared("alice", "other", g)
	require.NotSame(t, a, b)

	r.Set("alice", "/", nil)
	require.Nil(t, a.Grant(), "Set on one vhost")
	require.NotNil(t, b.Grant())
	r.Set("alice", "", g)
	require.NotNil(t, a.Grant(), "Set on every vhost")
	r.Revoke("other")
	require.Nil(t, b.Grant())
	require.NotNil(t, a.Grant())
}
