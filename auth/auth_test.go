package auth

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fixed authenticates one user with one secret.
type fixed struct {
	user, secret string
	err          error // returned instead, when set
	calls        atomic.Int32
}

func (f *fixed) Authenticate(ctx context.Context, req Request) (Identity, error) {
	f.calls.Add(1)
	if f.err != nil {
		return Identity{}, f.err
	}
	if req.User != f.user || req.Secret != f.secret {
		return Identity{}, Refuse("invalid credentials")
	}
	return Identity{User: req.User, Tags: []string{"monitoring"}}, nil
}

// TestChainAuthenticate: entries are tried in order; a refusal or an error
// moves on; the Authz of the entry that let the user in comes back; only
// errors and no refusal is an error that is not ErrRefused.
func TestChainAuthenticate(t *testing.T) {
	down := errors.New("backend down")
	allowAll := Funcs{}
	for _, tc := range []struct {
		name        string
		chain       Chain
		user, pw    string
		wantBackend string
		wantErr     error
		notRefused  bool
	}{
		{"empty chain refuses", nil, "a", "p", "", ErrRefused, false},
		{"first accepts", Chain{{Name: "one", Authn: &fixed{user: "a", secret: "p"}, Authz: allowAll}, {Name: "two", Authn: &fixed{user: "a", secret: "p"}}}, "a", "p", "one", nil, false},
		{"second after refusal", Chain{{Name: "one", Authn: &fixed{user: "b", secret: "p"}}, {Name: "two", Authn: &fixed{user: "a", secret: "p"}}}, "a", "p", "two", nil, false},
		{"second after error", Chain{{Name: "one", Authn: &fixed{err: down}}, {Name: "two", Authn: &fixed{user: "a", secret: "p"}}}, "a", "p", "two", nil, false},
		{"refused by all", Chain{{Name: "one", Authn: &fixed{user: "b", secret: "p"}}, {Name: "two", Authn: &fixed{err: down}}}, "a", "p", "", ErrRefused, false},
		{"errors only", Chain{{Name: "one", Authn: &fixed{err: down}}}, "a", "p", "", down, true},
		{"authz-only entry skipped", Chain{{Name: "authz", Authz: allowAll}, {Name: "two", Authn: &fixed{user: "a", secret: "p"}}}, "a", "p", "two", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.chain.Authenticate(context.Background(), Request{Mechanism: "PLAIN", User: tc.user, Secret: tc.pw})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				if tc.notRefused {
					require.NotErrorIs(t, err, ErrRefused)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantBackend, l.Backend)
			require.Equal(t, tc.user, l.Identity.User)
		})
	}
}

// TestCache: an allowed login and an allowed decision are answered from
// the cache until the TTL passes; refusals are asked every time.
func TestCache(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	inner := &fixed{user: "a", secret: "p"}
	var asked atomic.Int32
	authz := Funcs{VHost: func(ctx context.Context, id Identity, vhost string) (bool, error) {
		asked.Add(1)
		return vhost == "/", nil
	}}
	c := &Cache{Authn: inner, Authz: authz, TTL: time.Minute, Now: func() time.Time { return now }}
	ctx := context.Background()
	for range 3 {
		_, err := c.Authenticate(ctx, Request{User: "a", Secret: "p"})
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, inner.calls.Load(), "allowed login cached")
	for range 2 {
		_, err := c.Authenticate(ctx, Request{User: "a", Secret: "wrong"})
		require.ErrorIs(t, err, ErrRefused)
	}
	require.EqualValues(t, 3, inner.calls.Load(), "refusals not cached")
	now = now.Add(2 * time.Minute)
	_, err := c.Authenticate(ctx, Request{User: "a", Secret: "p"})
	require.NoError(t, err)
	require.EqualValues(t, 4, inner.calls.Load(), "expired entry asked again")

	id := Identity{User: "a"}
	for range 3 {
		ok, err := c.VHostAccess(ctx, id, "/")
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = c.VHostAccess(ctx, id, "other")
		require.NoError(t, err)
		require.False(t, ok)
	}
	require.EqualValues(t, 4, asked.Load(), "one allowed ask, three refused ones")
}

// TestFuncs: nil authorisation funcs allow, a nil Login refuses.
func TestFuncs(t *testing.T) {
	ctx := context.Background()
	_, err := Funcs{}.Authenticate(ctx, Request{User: "a"})
	require.ErrorIs(t, err, ErrRefused)
	ok, err := Funcs{}.ResourceAccess(ctx, Identity{}, Resource{}, Write)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = Funcs{Topic: func(context.Context, Identity, Resource, Permission, string) (bool, error) { return false, nil }}.TopicAccess(ctx, Identity{}, Resource{}, Read, "k")
	require.NoError(t, err)
	require.False(t, ok)
}
