package raft_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta/raft"
	"github.com/warrenmq/broker/storage"
)

// latencies keeps the slowest write that was still running at a mark or
// started after it.
type latencies struct {
	mu    sync.Mutex
	since time.Time
	worst time.Duration
	fails int
}

func (l *latencies) mark() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since, l.worst, l.fails = time.Now(), 0, 0
}

func (l *latencies) add(start time.Time, d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.since.IsZero() || start.Add(d).Before(l.since) {
		return
	}
	l.worst = max(l.worst, d)
	if err != nil {
		l.fails++
	}
}

func (l *latencies) get() (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.worst, l.fails
}

// TestPausedMemberDoesNotStallOthers pauses a member (its traffic stops as
// a SIGSTOPped process's: the others' sends to it block once its socket
// buffers are full) under a steady load of 16 KiB appends through the other
// two, resumes it, and checks that it catches up while the others'
// writes go on: the leader's queue to it stays within its bound, and the
// slowest write of the healthy members from the pause on (from the new
// leader's election when the leader is paused) is reported, and held to a
// bound far above a stall-free figure (half the pause), so that only a
// stall fails it.
func TestPausedMemberDoesNotStallOthers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pauseLeader bool
	}{
		{"follower", false},
		{"leader", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const pause = 6 * time.Second
			c := newCluster(t, 3, 0)
			ctx := testCtx(t)
			lead := c.waitLeader(ctx)
			paused := (lead + 1) % 3
			if tc.pauseLeader {
				paused = lead
			}
			var healthy []*raft.Node
			for i, n := range c.nodes {
				if i != paused {
					healthy = append(healthy, n)
				}
			}

			var lat latencies
			var written atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			body := make([]byte, 16<<10)
			for w := range 4 {
				n := healthy[w%2]
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						start := time.Now()
						wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
						_, err := n.Shards().Append(wctx, fmt.Sprint("q", w), []storage.Record{{Body: body, Persistent: true}})
						cancel()
						lat.add(start, time.Since(start), err)
						if err == nil {
							written.Add(1)
						}
					}
				})
			}
			defer func() {
				close(stop)
				wg.Wait()
			}()
			waitFor(ctx, t, func() bool { return written.Load() >= 200 })

			pausedID := c.nodes[paused].ID()
			c.net.Pause(pausedID)
			paused0 := time.Now()
			before := written.Load()
			if !tc.pauseLeader {
				lat.mark()
			}
			newLead := c.nodes[c.waitLeaderAmong(ctx, healthy)]
			if tc.pauseLeader {
				// The election the pause causes is not a stall.
				lat.mark()
			}
			time.Sleep(pause - time.Since(paused0))
			backlog := written.Load() - before
			target := newLead.AppliedIndex()
			resumed := time.Now()
			c.net.Resume(pausedID)

			// The resumed member catches up while the load goes on.
			waitFor(ctx, t, func() bool { return c.nodes[paused].AppliedIndex() >= target })
			caughtUp := time.Since(resumed)
			// The load goes on for a while after it caught up, too.
			after := written.Load()
			waitFor(ctx, t, func() bool { return written.Load() >= after+200 })
			worst, fails := lat.get()

			high, drops := newLead.QueueStats(pausedID)
			t.Logf("paused %s %v with %d appends of 16 KiB behind it (leader at index %d); caught up in %v; slowest healthy write %v (%d failed); leader's queue to it: high %d bytes, %d dropped",
				tc.name, pause, backlog, target, caughtUp.Round(time.Millisecond), worst.Round(time.Millisecond), fails, high, drops)
			require.LessOrEqual(t, high, raft.MaxQueueBytes+1024*64, "the leader's queue to the paused member outgrew its bound")
			require.Less(t, worst, pause/2, "a healthy member's write stalled")
		})
	}
}

// TestResumedLeaderFindsNewLeader pauses the leader right after a follower
// forwarded it a write, so that the proposal reaches it only after the
// pause, when it has stepped down and knows no leader. Stepping a proposal
// into raft waits until the node knows a leader; done on the goroutine
// that steps every incoming message, it kept the new leader's messages
// from ever being stepped, and the resumed member never rejoined.
func TestResumedLeaderFindsNewLeader(t *testing.T) {
	c := newCluster(t, 3, 0)
	ctx := testCtx(t)
	lead := c.waitLeader(ctx)
	old := c.nodes[lead]
	var others []*raft.Node
	for i, n := range c.nodes {
		if i != lead {
			others = append(others, n)
		}
	}
	c.net.Pause(old.ID())
	// Forwarded to the paused leader: held for it until the resume.
	for _, n := range others {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := n.Shards().Append(wctx, "q", []storage.Record{{Body: []byte("to the old leader")}})
		cancel()
		require.Error(t, err)
	}
	next := c.nodes[c.waitLeaderAmong(ctx, others)]
	waitFor(ctx, t, func() bool { return old.Leader() == 0 })
	c.net.Resume(old.ID())
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	waitFor(wctx, t, func() bool { return old.Leader() == next.ID() })
	_, err := old.Shards().Append(ctx, "q", []storage.Record{{Body: []byte("after")}})
	require.NoError(t, err)
}

// TestLostProposalFails loses a write that a follower forwards to the
// leader while the leader stays: raft reports nothing, and the write must
// still end (ErrProposalLost, outcome unknown) for a caller without a
// deadline instead of waiting forever.
func TestLostProposalFails(t *testing.T) {
	c := newCluster(t, 3, 0)
	ctx := testCtx(t)
	lead := c.waitLeader(ctx)
	f := c.follower(ctx)
	c.net.SetLink(c.nodes[f].ID(), c.nodes[lead].ID(), raft.Link{Drop: true})
	done := make(chan error, 1)
	go func() {
		_, err := c.nodes[f].Shards().Append(context.Background(), "q", []storage.Record{{Body: []byte("lost")}})
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, raft.ErrProposalLost)
	case <-ctx.Done():
		t.Fatal("a lost write never returned")
	}
	c.net.Heal()
	_, err := c.nodes[f].Shards().Append(ctx, "q", []storage.Record{{Body: []byte("after")}})
	require.NoError(t, err)
}
