package qgroup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/warrenmq/broker/storage"

	"github.com/warrenmq/broker/internal/measure"
	"github.com/warrenmq/broker/internal/multiraft"
)

// envInt is the integer in environment variable name, def when unset.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

// vmRSS is the process's resident set from /proc (0 elsewhere).
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// measureMembers starts n engines on one MemNetwork whose groups' state
// machines are queue states, with the engines' default checkpointing.
func measureMembers(t *testing.T, n int) []*multiraft.Engine {
	return measureMembersIn(t, n, t.TempDir())
}

func measureMembersIn(t *testing.T, n int, base string) []*multiraft.Engine {
	net := multiraft.NewMemNetwork()
	t.Cleanup(net.Close)
	trs := make([]multiraft.Transport, n)
	for i := range trs {
		trs[i] = net.Transport(uint64(i + 1))
	}
	es := make([]*multiraft.Engine, n)
	for i := range es {
		e, err := multiraft.New(multiraft.Config{ID: uint64(i + 1), Dir: fmt.Sprintf("%s/%d", base, i+1), Transport: trs[i],
			NewStateMachine: func(g uint64) multiraft.StateMachine { return newState(testKey, &feed{}) }})
		require.NoError(t, err)
		t.Cleanup(func() { e.Close() })
		es[i] = e
	}
	return es
}

// createMeasured creates groups 1..groups on every engine, led in turn.
func createMeasured(t *testing.T, es []*multiraft.Engine, groups int) {
	ctx := context.Background()
	ids := make([]uint64, len(es))
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	var eg errgroup.Group
	eg.SetLimit(64)
	for g := uint64(1); g <= uint64(groups); g++ {
		eg.Go(func() error {
			for _, e := range es {
				if err := e.CreateGroup(ctx, g, ids); err != nil {
					return err
				}
			}
			return es[g%uint64(len(es))].Campaign(ctx, g)
		})
	}
	require.NoError(t, eg.Wait())
}

// TestMeasureBacklogMemory is a measurement, run when QGROUP_MEASURE is
// set: QGROUP_GROUPS groups (default 30) on QGROUP_MEMBERS in-process
// members (default 1), each given a backlog of QGROUP_RECORDS records
// (default 10,000) of 1 KiB, 100 a command; it logs the live heap
// (runtime/metrics after two collections) per member and per group, and
// the process's RSS.
func TestMeasureBacklogMemory(t *testing.T) {
	if os.Getenv("QGROUP_MEASURE") == "" {
		t.Skip("a measurement: set QGROUP_MEASURE=1")
	}
	groups, members, records := envInt(t, "QGROUP_GROUPS", 30), envInt(t, "QGROUP_MEMBERS", 1), envInt(t, "QGROUP_RECORDS", 10000)
	heap0 := measure.LiveHeap()
	base := t.TempDir()
	es := measureMembersIn(t, members, base)
	createMeasured(t, es, groups)
	ctx := context.Background()
	var eg errgroup.Group
	eg.SetLimit(8)
	body := bytes.Repeat([]byte("x"), 1024)
	for g := uint64(1); g <= uint64(groups); g++ {
		eg.Go(func() error {
			for sent := 0; sent < records; sent += 100 {
				recs := make([]storage.Record, min(100, records-sent))
				for i := range recs {
					recs[i] = storage.Record{Body: body, Persistent: true}
				}
				for {
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					_, err := es[0].Propose(cctx, g, appendCommand(recs))
					cancel()
					if err == nil {
						break
					}
					if !strings.Contains(err.Error(), "leader") && !strings.Contains(err.Error(), "deadline") {
						return err
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			return nil
		})
	}
	require.NoError(t, eg.Wait())
	time.Sleep(2 * time.Second) // the followers apply, checkpoints land
	heap := measure.LiveHeap() - heap0
	backlog := int64(groups) * int64(records) * 1024
	t.Logf("%d groups x %d records x 1 KiB on %d members: backlog %d MiB per member; live heap %d MiB in all, %.1f MiB per member, %.0f KiB per group per member; RSS %d MiB",
		groups, records, members, backlog>>20, heap>>20, float64(heap)/float64(members)/(1<<20), float64(heap)/float64(groups*members)/1024, vmRSS()>>20)

	// A restart of every member: how long New takes to have every group
	// ready, and what their state machines applied again.
	for _, e := range es {
		require.NoError(t, e.Close())
	}
	start := time.Now()
	again := measureMembersIn(t, members, base)
	took := time.Since(start)
	time.Sleep(2 * time.Second) // raft hands back the log after each checkpoint meanwhile
	var applied, restores uint64
	for _, e := range again {
		applied += e.Stats().Applied
		restores += e.Stats().Restores
	}
	t.Logf("restart of %d members: New took %v in all; %d entries applied again, %d snapshots restored",
		members, took.Round(time.Millisecond), applied, restores)
}

// TestMeasureIdleGroupsMemory is a measurement, run when QGROUP_MEASURE
// is set: QGROUP_IDLE (default 10,000) empty queue groups on 3 in-process
// members; it logs the live heap per group per member once they are
// created and quiesced.
func TestMeasureIdleGroupsMemory(t *testing.T) {
	if os.Getenv("QGROUP_MEASURE") == "" {
		t.Skip("a measurement: set QGROUP_MEASURE=1")
	}
	groups := envInt(t, "QGROUP_IDLE", 10000)
	heap0 := measure.LiveHeap()
	es := measureMembers(t, 3)
	createMeasured(t, es, groups)
	require.Eventually(t, func() bool {
		for _, e := range es {
			if e.Stats().Active != 0 {
				return false
			}
		}
		return true
	}, 5*time.Minute, 200*time.Millisecond, "every group quiesces")
	time.Sleep(time.Second)
	heap := measure.LiveHeap() - heap0
	t.Logf("%d idle queue groups on 3 members: live heap %d MiB, %.1f KiB per group per member; RSS %d MiB",
		groups, heap>>20, float64(heap)/float64(groups*3)/1024, vmRSS()>>20)
}
