package multiraft

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// TestProposalsSurviveLeaderTransfers proposes from every member while
// the group's leadership moves around its voters again and again: every
// proposal returns without error (none is failed as "outcome unknown"
// for a leader change), and every replica applied each command exactly
// once.
func TestProposalsSurviveLeaderTransfers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := newTestCluster(t, 3, func(c *Config) { c.ProposalTimeout = 30 * time.Second })
	ids := c.ids()
	for _, id := range ids {
		require.NoError(t, c.members[id].e.CreateGroup(ctx, 1, ids))
	}
	require.NoError(t, c.members[1].e.Campaign(ctx, 1))
	c.leader(ctx, 1, 1)

	const perProposer = 60
	done := make(chan struct{})
	var transfers sync.WaitGroup
	var moved atomic.Int64
	transfers.Add(1)
	go func() {
		defer transfers.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(3 * testTick):
			}
			lead := c.leader(ctx, 1, 1)
			to := lead%uint64(len(ids)) + 1
			if c.members[lead].e.TransferLeader(ctx, 1, to) == nil {
				moved.Add(1)
			}
		}
	}()
	var eg errgroup.Group
	var proposed atomic.Int64
	for _, via := range ids {
		for w := range 3 {
			eg.Go(func() error {
				// At least perProposer, and on until leadership moved
				// a few times.
				for i := 0; i < perProposer || moved.Load() < 6; i++ {
					cmd := fmt.Sprintf("m%d-w%d-%d", via, w, i)
					if _, err := c.members[via].e.Propose(ctx, 1, []byte(cmd)); err != nil {
						return fmt.Errorf("%s: %w", cmd, err)
					}
					proposed.Add(1)
				}
				return nil
			})
		}
	}
	err := eg.Wait()
	want := int(proposed.Load())
	close(done)
	transfers.Wait()
	require.NoError(t, err)
	require.GreaterOrEqual(t, moved.Load(), int64(6), "leadership moved too few times to test anything")
	require.Eventually(t, func() bool { return c.converged(1, want) }, 20*time.Second, 10*time.Millisecond)
	for _, id := range ids {
		seen := map[string]int{}
		sm := c.members[id].sm(1)
		sm.mu.Lock()
		for _, cmd := range sm.cmds {
			seen[string(cmd)]++
		}
		sm.mu.Unlock()
		require.Len(t, seen, want, "member %d", id)
		for cmd, n := range seen {
			require.Equal(t, 1, n, "member %d applied %q %d times", id, cmd, n)
		}
	}
}

// TestDedupAdmit is the table's verdicts on a proposer's entries.
func TestDedupAdmit(t *testing.T) {
	var tab dedupTable
	steps := []struct {
		id   identity
		want verdict
	}{
		{identity{}, applyIt}, // format 1: no identity
		{identity{proposer: 2, inc: 5, gseq: 1}, applyIt},
		{identity{proposer: 2, inc: 5, gseq: 1}, copyOf},
		{identity{proposer: 2, inc: 5, gseq: 3}, ahead}, // 2 is missing
		{identity{proposer: 1, inc: 9, gseq: 1}, applyIt},
		{identity{proposer: 2, inc: 5, gseq: 2}, applyIt},
		{identity{proposer: 2, inc: 5, gseq: 3}, applyIt},
		{identity{proposer: 2, inc: 4, gseq: 9}, copyOf}, // an earlier incarnation
		{identity{proposer: 2, inc: 6, gseq: 2}, ahead},  // a restart: from 1 again
		{identity{proposer: 2, inc: 6, gseq: 1}, applyIt},
	}
	for i, s := range steps {
		require.Equal(t, s.want, tab.admit(s.id), "step %d", i)
	}
	require.Equal(t, dedupTable{{proposer: 1, inc: 9, next: 2}, {proposer: 2, inc: 6, next: 2}}, tab)
	got, err := decodeDedup(encodeDedup(tab))
	require.NoError(t, err)
	require.Equal(t, tab, got)
	wt, sm, err := unwrapSnapshot(wrapSnapshot(tab, []byte("state")))
	require.NoError(t, err)
	require.Equal(t, tab, wt)
	require.Equal(t, []byte("state"), sm)
	wt, sm, err = unwrapSnapshot([]byte("an earlier version's"))
	require.NoError(t, err)
	require.Empty(t, wt)
	require.Equal(t, []byte("an earlier version's"), sm)
}

// TestDedupDecodeRefuses is tables and snapshots that do not decode.
func TestDedupDecodeRefuses(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":           nil,
		"version":         {2, 0},
		"count past data": {1, 9, 1, 1, 1},
		"short row":       {1, 1, 1, 1},
		"proposer 0":      {1, 1, 0, 1, 1},
		"next 0":          {1, 1, 1, 1, 0},
		"unsorted":        {1, 2, 2, 1, 1, 1, 1, 1},
		"trailing":        {1, 0, 7},
	} {
		_, err := decodeDedup(b)
		require.ErrorIs(t, err, errDedup, name)
	}
	bad := append(append([]byte{}, snapDedupMark...), 50, 1)
	_, _, err := unwrapSnapshot(bad)
	require.ErrorIs(t, err, errDedup)
}

// FuzzDecodeDedup decodes arbitrary bytes as a table and as a snapshot's
// data: no input panics, and what decodes survives encoding again.
func FuzzDecodeDedup(f *testing.F) {
	f.Add(encodeDedup(dedupTable{{proposer: 1, inc: 9, next: 2}, {proposer: 3, inc: 1, next: 70000}}))
	f.Add(wrapSnapshot(dedupTable{{proposer: 2, inc: 5, next: 1}}, []byte("sm")))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if tab, err := decodeDedup(b); err == nil {
			again, err := decodeDedup(encodeDedup(tab))
			require.NoError(t, err)
			require.Equal(t, tab, again)
		}
		if tab, sm, err := unwrapSnapshot(b); err == nil && len(tab) > 0 {
			wt, wsm, err := unwrapSnapshot(wrapSnapshot(tab, sm))
			require.NoError(t, err)
			require.Equal(t, tab, wt)
			require.Equal(t, sm, wsm)
		}
		_, _, _, _ = parseEntry(b)
	})
}
