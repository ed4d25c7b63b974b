package indextest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/capability"
	"github.com/warrenmq/broker/unacked"
)

// Option changes what Run checks.
type Option func(*config)

type config struct{ without []string }

// Without says the index does not offer the named optional interfaces
// (names from unacked.Capabilities: "unacked.Claimer"). Run checks every
// capability by default: an index that lacks one not named here fails,
// and so does one that implements a capability named here.
func Without(names ...string) Option {
	return func(c *config) { c.without = append(c.without, names...) }
}

func testCapabilities(t *testing.T, x unacked.Index, c config) {
	for _, p := range capability.Declared(unacked.Capabilities, x, c.without, "indextest", "unacked.Wrap") {
		t.Errorf("indextest: %s", p)
	}
}

// testClaimer checks unacked.Claimer on a queue whose cursor is unset
// (it reads 0): a claim moving it from 0 succeeds and writes its
// entries; the same move again fails and writes nothing; taking an entry
// that is not Returned fails; taking a Returned one succeeds.
func testClaimer(t *testing.T, x unacked.Index) {
	cl, ok := x.(unacked.Claimer)
	if !ok {
		t.Skip("indextest: index does not implement unacked.Claimer")
	}
	ctx := context.Background()
	q := "claimer-q"
	e0, e1 := entry("/", q, 0), entry("/", q, 1)
	ok, err := cl.Claim(ctx, unacked.Claim{VHost: "/", Queue: q, Move: true, From: 0, To: 2, Entries: []unacked.Entry{e0, e1}})
	require.NoError(t, err)
	require.True(t, ok, "the cursor of a new queue is 0")
	require.Equal(t, []unacked.Entry{e0, e1}, queueEntries(t, x, "/", q))

	e2 := entry("/", q, 2)
	ok, err = cl.Claim(ctx, unacked.Claim{VHost: "/", Queue: q, Move: true, From: 0, To: 3, Entries: []unacked.Entry{e2}})
	require.NoError(t, err)
	require.False(t, ok, "the cursor moved on: another broker got there first")
	require.Equal(t, []unacked.Entry{e0, e1}, queueEntries(t, x, "/", q), "a failed claim writes nothing")

	ok, err = cl.Claim(ctx, unacked.Claim{VHost: "/", Queue: q, Taken: []unacked.Key{e0.Key}, Entries: []unacked.Entry{e0}})
	require.NoError(t, err)
	require.False(t, ok, "e0 is Delivered, not Returned")

	ret := e0
	ret.State = unacked.Returned
	require.NoError(t, x.Put(ctx, []unacked.Entry{ret}))
	again := e0
	again.DeliveryCount = 2
	ok, err = cl.Claim(ctx, unacked.Claim{VHost: "/", Queue: q, Taken: []unacked.Key{e0.Key}, Entries: []unacked.Entry{again}})
	require.NoError(t, err)
	require.True(t, ok)
	got, err := x.Get(ctx, e0.Key)
	require.NoError(t, err)
	require.Equal(t, again, got)
}
