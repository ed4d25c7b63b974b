package session

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/auth"
)

// TestDecisions: a connection keeps its last permCacheSize allowed
// answers, newest first, each for permCacheTTL from when it was asked.
func TestDecisions(t *testing.T) {
	var ds decisions
	t0 := time.Unix(1_000_000, 0)
	for i := range permCacheSize + 1 {
		ds.remember(decision{kind: permWrite, resource: "exchange", name: fmt.Sprint("x", i), asked: t0})
	}
	require.False(t, ds.allowed(t0, permWrite, "exchange", "x0", ""), "the oldest is dropped")
	for i := 1; i <= permCacheSize; i++ {
		require.True(t, ds.allowed(t0, permWrite, "exchange", fmt.Sprint("x", i), ""))
	}
	require.False(t, ds.allowed(t0, permRead, "exchange", "x1", ""), "another permission is another answer")
	require.False(t, ds.allowed(t0, permWrite, "queue", "x1", ""), "another kind of resource too")
	require.False(t, ds.allowed(t0.Add(permCacheTTL), permWrite, "exchange", "x1", ""), "expired")
	ds.remember(decision{kind: permWrite, resource: "exchange", name: "x1", asked: t0.Add(permCacheTTL)})
	require.True(t, ds.allowed(t0.Add(permCacheTTL), permWrite, "exchange", "x1", ""), "asked again")
	require.Equal(t, permCacheSize, ds.n, "a refreshed answer takes no second place")

	ds = decisions{}
	ds.remember(decision{kind: permWrite, resource: "topic", name: "amq.topic", key: "a.b", asked: t0})
	require.True(t, ds.allowed(t0, permWrite, "topic", "amq.topic", "a.b"))
	require.False(t, ds.allowed(t0, permWrite, "topic", "amq.topic", "a.c"), "another key")
}

// TestAuthzAsk: an answer in time is the Authorizer's; one that does not
// come within Timeout is an error even when the Authorizer ignores its
// context.
func TestAuthzAsk(t *testing.T) {
	z := &Authz{Timeout: 50 * time.Millisecond}
	ok, err := z.Ask(func(ctx context.Context) (bool, error) { return true, nil })
	require.NoError(t, err)
	require.True(t, ok)
	down := errors.New("down")
	_, err = z.Ask(func(ctx context.Context) (bool, error) { return false, down })
	require.ErrorIs(t, err, down)
	release := make(chan struct{})
	defer close(release)
	ok, err = z.Ask(func(ctx context.Context) (bool, error) { <-release; return true, nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ok)
}

// BenchmarkPermissionCheck is the permission check of one basic.publish
// to the same exchange: by the user database's grant ("grant", what
// Options.Auth = auth.Internal runs too), and by an Authorizer answered
// from the connection's cache ("authz").
func BenchmarkPermissionCheck(b *testing.B) {
	m := &amqp.BasicPublish{Exchange: "orders", RoutingKey: "k"}
	grant := &Grant{Configure: regexp.MustCompile(".*"), Write: regexp.MustCompile("^orders$"), Read: regexp.MustCompile(".*")}
	for _, bc := range []struct {
		name   string
		access *Access
	}{
		{"grant", NewAccess("u", "/", grant)},
		{"authz", NewAuthzAccess("/", &Authz{Authorizer: auth.Funcs{}, Identity: auth.Identity{User: "u"}, Timeout: time.Second})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := &Conn{access: bc.access}
			b.ReportAllocs()
			for b.Loop() {
				if err := c.checkPublish(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
