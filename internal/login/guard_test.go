package login

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/meta"
)

// users is a Users with one user, or a store that fails every read.
type users struct {
	u   meta.User
	err error
}

func (s users) GetUser(ctx context.Context, name string) (meta.User, error) {
	if s.err != nil {
		return meta.User{}, s.err
	}
	if name != s.u.Name {
		return meta.User{}, meta.ErrNotFound
	}
	return s.u, nil
}

// TestGuardPassword: right credentials log in; wrong ones and unknown
// users are ErrRefused and count against the source; an unavailable store
// is ErrUnavailable and does not; a throttled login whose ctx ends is
// ErrClosed.
func TestGuardPassword(t *testing.T) {
	peer := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}
	alg, hash := passwd.Export(passwd.Hash("p"))
	stored := users{u: meta.User{Name: "u", PasswordHash: hash, HashingAlgorithm: alg, Tags: meta.UserTags{"monitoring"}}}
	down := users{err: errors.New("no leader")}
	for _, tc := range []struct {
		name     string
		users    users
		user, pw string
		want     error
		counted  bool
	}{
		{"right", stored, "u", "p", nil, false},
		{"wrong password", stored, "u", "x", ErrRefused, true},
		{"no such user", stored, "v", "p", ErrRefused, true},
		{"name too long", stored, string(make([]byte, 256)), "p", ErrRefused, true},
		{"store unavailable", down, "u", "p", ErrUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Guard{Throttle: NewThrottle(clock.NewFake(time.Unix(1_000_000, 0))), Users: tc.users, Timeout: time.Second}
			for range FreeFailures {
				g.Throttle.Failed(SourceKey(peer))
			}
			u, err := g.Password(context.Background(), peer, tc.user, tc.pw)
			if tc.want == nil {
				require.NoError(t, err)
				require.Equal(t, stored.u, u)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
			if tc.counted {
				require.Positive(t, g.Throttle.Admit(SourceKey(peer)), "the failure counted")
			} else {
				require.Zero(t, g.Throttle.Admit(SourceKey(peer)), "no failure counted")
			}
		})
	}

	g := &Guard{Throttle: NewThrottle(clock.Real), Users: stored, Timeout: time.Second}
	for range FreeFailures + 1 {
		g.Throttle.Failed(SourceKey(peer))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := g.Password(ctx, peer, "u", "p")
	require.ErrorIs(t, err, ErrClosed, "a throttled login whose caller left is not answered")
	quit := make(chan struct{})
	close(quit)
	g.Quit = quit
	_, err = g.Password(context.Background(), peer, "u", "p")
	require.ErrorIs(t, err, ErrClosed, "nor one the broker closed on")
}
