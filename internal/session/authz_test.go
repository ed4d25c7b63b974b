package session

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
