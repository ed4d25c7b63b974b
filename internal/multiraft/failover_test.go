package multiraft

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// commitLog is when each proposal of a writer committed.
type commitLog struct {
	mu    sync.Mutex
	times []time.Time
}

func (l *commitLog) add(t time.Time) { l.mu.Lock(); l.times = append(l.times, t); l.mu.Unlock() }

// maxGap is the longest time without a commit between from and to.
func (l *commitLog) maxGap(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, gap := from, time.Duration(0)
	for _, t := range l.times {
		if t.Before(from) || t.After(to) {
			continue
		}
		gap = max(gap, t.Sub(last))
		last = t
	}
	return max(gap, to.Sub(last))
}

// TestKillMember kills the member that leads a third of the groups while
// every group takes proposals through the other members: the groups it
// led pause for about an election timeout and elect elsewhere, quiesced
// ones included; the others keep committing all along. The member then
// restarts from its directory (checkpoints and the log tail after them)
// and every group's replicas converge.
func TestKillMember(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		t.Run(fmt.Sprintf("tcp=%v", tcp), func(t *testing.T) { testKillMember(t, tcp) })
	}
}

func testKillMember(t *testing.T, tcp bool) {
	const busy, idle = 30, 30
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	small := func(c *Config) { c.SnapshotEntries = 16 }
	var c *testCluster
	if tcp {
		c = newTCPCluster(t, 3, small)
	} else {
		c = newTestCluster(t, 3, small)
	}
	c.createGroups(ctx, busy+idle)
	const victim = 1
	led := map[uint64]bool{}
	for g := uint64(1); g <= busy+idle; g++ {
		led[g] = c.leader(ctx, 2, g) == victim
	}
	// The idle groups quiesce: nothing proposes to them.
	require.Eventually(t, func() bool {
		for g := uint64(busy + 1); g <= busy+idle; g++ {
			st, err := c.members[2].e.Status(ctx, g)
			require.NoError(t, err)
			if !st.Quiesced {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "idle groups quiesce")

	wctx, stopWriters := context.WithCancel(ctx)
	logs := make([]*commitLog, busy+1)
	var wg sync.WaitGroup
	for g := uint64(1); g <= busy; g++ {
		logs[g] = &commitLog{}
		via := 2 + g%2 // never the victim
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; wctx.Err() == nil; i++ {
				pctx, cancel := context.WithTimeout(wctx, 300*time.Millisecond)
				_, err := c.members[via].e.Propose(pctx, g, []byte(fmt.Sprintf("%d-%d", g, i)))
				cancel()
				if err == nil {
					logs[g].add(time.Now())
				} else {
					time.Sleep(testTick / 5)
				}
			}
		}()
	}
	stopped := false
	defer func() {
		if !stopped {
			stopWriters()
			wg.Wait()
		}
	}()
	time.Sleep(time.Second)
	// How long groups led elsewhere go without a commit when nothing
	// fails: the baseline the gaps after the kill compare with.
	baseline := time.Duration(0)
	for g := uint64(1); g <= busy; g++ {
		baseline = max(baseline, logs[g].maxGap(time.Now().Add(-700*time.Millisecond), time.Now()))
	}
	t.Logf("longest commit gap before the kill: %v", baseline)
	killed := time.Now()
	c.kill(victim)
	election := testTick * 10
	// Every group the victim led, busy or quiesced, elects a survivor.
	require.Eventually(t, func() bool {
		for g := uint64(1); g <= busy+idle; g++ {
			if !led[g] {
				continue
			}
			st, err := c.members[2].e.Status(ctx, g)
			require.NoError(t, err)
			if st.Leader == 0 || st.Leader == victim {
				return false
			}
		}
		return true
	}, 15*time.Second, 10*time.Millisecond, "the victim's groups elect elsewhere")
	elected := time.Since(killed)
	time.Sleep(time.Second)
	stopWriters()
	wg.Wait()
	stopped = true
	end := time.Now()
	var others, its []time.Duration
	for g := uint64(1); g <= busy; g++ {
		gap := logs[g].maxGap(killed, end)
		if led[g] {
			its = append(its, gap)
		} else {
			others = append(others, gap)
		}
	}
	slices.Sort(others)
	slices.Sort(its)
	t.Logf("election timeout %v; the victim's groups all led elsewhere after %v", election, elected)
	t.Logf("longest commit gap after the kill: groups led elsewhere %v (median %v), the victim's %v (median %v)",
		others[len(others)-1], others[len(others)/2], its[len(its)-1], its[len(its)/2])
	require.NotEmpty(t, its)
	require.NotEmpty(t, others)
	// The groups led elsewhere never waited for an election: each
	// committed while the victim's groups were electing, and their gaps
	// are shorter than the victim's groups', which include an election.
	// (Not a bound in milliseconds: the race detector on a shared
	// machine stalls everything now and then.)
	require.Less(t, others[len(others)/2], its[len(its)/2], "groups led elsewhere keep committing")
	for g := uint64(1); g <= busy; g++ {
		if !led[g] {
			require.Less(t, logs[g].maxGap(killed, killed.Add(elected)), elected, "group %d committed while the victim's groups elected", g)
		}
	}

	// Restart: the victim replays its checkpoints and log tails and
	// catches up on what it missed.
	c.restart(victim)
	require.Eventually(t, func() bool {
		for g := uint64(1); g <= busy+idle; g++ {
			if !c.converged(g, 0) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "every group's replicas converge after the restart")
	require.NotZero(t, c.members[2].e.Stats().Snapshots, "checkpoints were taken")
	// And the restarted member commits again.
	require.NoError(t, c.propose(ctx, victim, 1, []byte("after restart")))
}
