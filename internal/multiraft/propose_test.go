package multiraft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProposalBeforeElectionWaits proposes on every member of a group no
// member has campaigned in yet: raft drops each (no leader), the engine
// parks them and proposes them again once the group elected, so each
// commits exactly once without the caller retrying.
func TestProposalBeforeElectionWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newTestCluster(t, 3, nil)
	ids := c.ids()
	for _, id := range ids {
		require.NoError(t, c.members[id].e.CreateGroup(ctx, 1, ids))
	}
	var wg sync.WaitGroup
	errs := make([]error, 0, 9)
	var mu sync.Mutex
	for _, id := range ids {
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.members[id].e.Propose(ctx, 1, fmt.Appendf(nil, "%d-%d", id, i))
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return c.converged(1, 9) }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 9, c.members[1].sm(1).len(), "each parked proposal committed once")
}

// TestLostProposalFailsClearly cuts a follower off from both other
// members and proposes on it: the proposal it forwards is lost, and
// Propose fails with an outcome-unknown error within the proposal
// timeout instead of waiting for the caller's context. The majority goes
// on committing; after the heal the follower converges.
func TestLostProposalFailsClearly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newTestCluster(t, 3, func(c *Config) { c.ProposalTimeout = time.Second })
	ids := c.ids()
	for _, id := range ids {
		require.NoError(t, c.members[id].e.CreateGroup(ctx, 1, ids))
	}
	require.NoError(t, c.members[1].e.Campaign(ctx, 1))
	require.NoError(t, c.propose(ctx, 3, 1, []byte("first")))
	require.Eventually(t, func() bool { return c.converged(1, 1) }, 10*time.Second, 10*time.Millisecond)

	c.net.Cut(3, 1)
	c.net.Cut(3, 2)
	_, err := c.members[3].e.Propose(ctx, 1, []byte("lost"))
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrProposalLost) || errors.Is(err, ErrLeaderChanged) || errors.Is(err, ErrNoLeader), "got %v", err)
	require.NoError(t, ctx.Err(), "failed before the caller's deadline")
	require.NoError(t, c.propose(ctx, 1, 1, []byte("majority")))

	c.net.Heal(3, 1)
	c.net.Heal(3, 2)
	require.Eventually(t, func() bool { return c.converged(1, 2) }, 20*time.Second, 10*time.Millisecond)
}

// TestApplierQueueBounded applies through a state machine that blocks
// until released, with a small MaxApplyBytes: proposals keep committing
// until the applier's queue holds the bound, then the loop waits for the
// applier; once released, everything applies and nothing was lost.
func TestApplierQueueBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	release := make(chan struct{})
	var gate sync.Once
	c := newTestCluster(t, 1, func(c *Config) {
		c.MaxApplyBytes = 4 << 10
		c.Appliers = 1
		inner := c.NewStateMachine
		c.NewStateMachine = func(g uint64) StateMachine {
			return &blockingSM{StateMachine: inner(g), release: release}
		}
	})
	require.NoError(t, c.members[1].e.CreateGroup(ctx, 1, []uint64{1}))
	require.NoError(t, c.members[1].e.Campaign(ctx, 1))
	defer gate.Do(func() { close(release) }) // a failure below must not leave Close waiting
	var wg sync.WaitGroup
	body := make([]byte, 512)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.members[1].e.Propose(ctx, 1, body)
			require.NoError(t, err)
		}()
	}
	time.Sleep(500 * time.Millisecond)
	a := c.members[1].e.apps[0]
	a.mu.Lock()
	queued := a.bytes
	a.mu.Unlock()
	require.LessOrEqual(t, queued, 4<<10+512+64, "the applier's queue stays at its bound")
	gate.Do(func() { close(release) })
	wg.Wait()
	require.Equal(t, 64, c.members[1].sm(1).len())
}

// blockingSM holds every Apply until release is closed.
type blockingSM struct {
	StateMachine
	release chan struct{}
}

func (b *blockingSM) Apply(w *Batch, index uint64, cmd []byte) []byte {
	<-b.release
	return b.StateMachine.Apply(w, index, cmd)
}
