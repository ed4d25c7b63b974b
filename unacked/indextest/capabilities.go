package indextest

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

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
	known := make(map[string]bool)
	for _, cp := range unacked.Capabilities {
		known[cp.Name] = true
		declared := !slices.Contains(c.without, cp.Name)
		switch has := cp.Has(x); {
		case has && !declared:
			t.Errorf("indextest: %T implements %s but the test says Without(%q)", x, cp.Name, cp.Name)
		case !has && declared:
			t.Errorf("indextest: %T does not implement %s (without it %s); if it is not meant to, pass indextest.Without(%q) (a wrapper that embeds an index loses it: see unacked.Wrap)",
				x, cp.Name, cp.Without, cp.Name)
		}
	}
	for _, n := range c.without {
		if !known[n] {
			t.Errorf("indextest: Without(%q): no such capability (see unacked.Capabilities)", n)
		}
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
