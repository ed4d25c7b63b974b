package multiraft

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/measure"
)

// TestIdleGroupsCost runs 10,000 groups on 3 engines in one process at
// the default tick (100ms), waits until every group quiesced, and then
// logs what they cost while idle: the process's CPU (getrusage) and the Go
// runtime's CPU classes over a few seconds, and the live heap per group
// per member. It asserts only what quiescence means: no group ticks and
// no group has a Ready while nothing is proposed; the CPU figures are
// logged, not asserted (the machine is shared). MULTIRAFT_IDLE_GROUPS
// changes the count.
func TestIdleGroupsCost(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a measurement: not under -short or the race detector")
	}
	groups := 10000
	if s := os.Getenv("MULTIRAFT_IDLE_GROUPS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		groups = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runtime.GC()
	heap0 := measure.LiveHeap()
	c := newTestCluster(t, 3, func(c *Config) { c.TickInterval = 100 * time.Millisecond })
	start := time.Now()
	c.createGroups(ctx, groups)
	t.Logf("%d groups created on 3 members and campaigned in %v", groups, time.Since(start))
	require.Eventually(t, func() bool {
		for _, m := range c.members {
			if m.e.Stats().Active != 0 {
				return false
			}
		}
		return true
	}, 3*time.Minute, 100*time.Millisecond, "every group quiesces")
	t.Logf("all quiesced %v after creation", time.Since(start))
	time.Sleep(time.Second) // the last quiescing beats land
	runtime.GC()
	heap := measure.LiveHeap() - heap0
	t.Logf("live heap %d MiB: %.1f KiB per group per member (3 members in this process)",
		heap>>20, float64(heap)/float64(groups*3)/1024)

	before := map[uint64]Stats{}
	for id, m := range c.members {
		before[id] = m.e.Stats()
	}
	// The runtime's CPU classes are brought up to date by a GC: one before
	// each read.
	samples := []metrics.Sample{{Name: "/cpu/classes/user:cpu-seconds"}}
	runtime.GC()
	metrics.Read(samples)
	user0 := samples[0].Value.Float64()
	cpu0, wall0 := measure.ProcessCPU(), time.Now()
	time.Sleep(5 * time.Second)
	cpu, wall := measure.ProcessCPU()-cpu0, time.Since(wall0)
	runtime.GC()
	metrics.Read(samples)
	user := samples[0].Value.Float64() - user0
	t.Logf("idle for %v: process CPU %v (%.2f%% of a core for 3 members, %.2f%% per member); Go code outside the runtime %.3fs (runtime/metrics)",
		wall.Round(time.Millisecond), cpu.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds(), 100*cpu.Seconds()/wall.Seconds()/3, user)
	for id, m := range c.members {
		st := m.e.Stats()
		require.Zero(t, st.Active, "member %d", id)
		require.Equal(t, before[id].ReadyGroups, st.ReadyGroups, "member %d: no group had a Ready while idle", id)
		require.Equal(t, before[id].Woken, st.Woken, "member %d: no group woke while idle", id)
	}
	// A proposal still commits, waking only its group.
	require.NoError(t, c.propose(ctx, 1, 1, []byte("wake")))
}
