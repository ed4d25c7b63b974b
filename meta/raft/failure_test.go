package raft_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/raft"
	"github.com/warrenmq/broker/storage"
)

// readAll reads every record of shard through s.
func readAll(ctx context.Context, t *testing.T, s storage.ShardStore, shard string) []storage.Record {
	t.Helper()
	var out []storage.Record
	for from := uint64(0); ; {
		page, err := s.Read(ctx, shard, from, 256)
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		from = page[len(page)-1].Offset + 1
	}
}

func bodies(recs []storage.Record) map[string]int {
	m := map[string]int{}
	for _, r := range recs {
		m[string(r.Body)]++
	}
	return m
}

// TestKillLeaderMidPublish kills the leader while publishers append through
// every node, and checks that each acknowledged record is on both
// survivors exactly once, and that the survivors agree record for record.
func TestKillLeaderMidPublish(t *testing.T) {
	c := newCluster(t, 3, 64)
	ctx := testCtx(t)
	lead := c.waitLeader(ctx)
	nodes := append([]*raft.Node(nil), c.nodes...)

	const publishers = 6
	var (
		mu     sync.Mutex
		acked  []string
		failed atomic.Int64
		done   = make(chan struct{})
		wg     sync.WaitGroup
	)
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	for p := range publishers {
		n := nodes[p%len(nodes)]
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				body := fmt.Sprintf("p%d-%d", p, i)
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := n.Shards().Append(actx, "q", []storage.Record{{Body: []byte(body), Persistent: true}})
				cancel()
				if err != nil {
					failed.Add(1)
					if errors.Is(err, raft.ErrStopped) {
						return // this publisher's node was killed
					}
					continue
				}
				mu.Lock()
				acked = append(acked, body)
				mu.Unlock()
			}
		})
	}
	waitFor(ctx, t, func() bool { return ackedCount() >= 100 })
	c.stop(lead)
	before := ackedCount()
	waitFor(ctx, t, func() bool { return ackedCount() >= before+200 })
	close(done)
	wg.Wait()

	c.waitLeader(ctx)
	var views [][]storage.Record
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		recs := readAll(ctx, t, n.Shards(), "q")
		got := bodies(recs)
		for _, b := range acked {
			require.Equal(t, 1, got[b], "acknowledged record %q", b)
		}
		for b, k := range got {
			require.Equal(t, 1, k, "record %q stored %d times", b, k)
		}
		views = append(views, recs)
	}
	require.Len(t, views, 2)
	require.Equal(t, views[0], views[1], "survivors disagree")
	t.Logf("acknowledged %d, failed calls %d, stored %d", len(acked), failed.Load(), len(views[0]))
}

// TestMinorityPartition cuts the leader off: its writes and reads fail, the
// majority elects a leader and carries on, and after healing the old
// leader converges on the majority's state.
func TestMinorityPartition(t *testing.T) {
	c := newCluster(t, 3, 32)
	ctx := testCtx(t)
	lead := c.waitLeader(ctx)
	q := meta.QueueKey{VHost: "/", Name: "q"}
	_, err := c.nodes[lead].Shards().Append(ctx, "q", []storage.Record{{Body: []byte("before")}})
	require.NoError(t, err)

	minority := c.nodes[lead]
	var majority []uint64
	var maj []*raft.Node
	for i, n := range c.nodes {
		if i != lead {
			majority = append(majority, n.ID())
			maj = append(maj, n)
		}
	}
	c.net.Partition([]uint64{minority.ID()}, majority)

	// The minority's writes never succeed: they wait until the deadline
	// or fail when its leadership lapses.
	for i := range 3 {
		wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		_, err := minority.Shards().Append(wctx, "q", []storage.Record{{Body: fmt.Appendf(nil, "minority-%d", i)}})
		cancel()
		require.Error(t, err, "a minority append succeeded")
		wctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
		_, err = minority.CompareAndSwapOffset(wctx, q, 0, 1)
		cancel()
		require.Error(t, err, "a minority swap succeeded")
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err = minority.Offset(rctx, q)
		cancel()
		require.Error(t, err, "a minority linearizable read succeeded")
	}

	// The majority elects a leader of its own and carries on.
	var want []string
	for i := range 20 {
		body := fmt.Sprintf("majority-%d", i)
		_, err := maj[i%2].Shards().Append(ctx, "q", []storage.Record{{Body: []byte(body)}})
		require.NoError(t, err)
		want = append(want, body)
	}
	ok, err := maj[0].CompareAndSwapOffset(ctx, q, 0, 7)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, minority.IsLeader() && maj[0].IsLeader() && maj[1].IsLeader())

	c.net.Heal()
	got := readAll(ctx, t, minority.Shards(), "q")
	require.Equal(t, readAll(ctx, t, maj[0].Shards(), "q"), got, "the healed node converges")
	b := bodies(got)
	require.Equal(t, 1, b["before"])
	for _, w := range want {
		require.Equal(t, 1, b[w], w)
	}
	off, err := minority.Offset(ctx, q)
	require.NoError(t, err)
	require.Equal(t, uint64(7), off)
}

// TestRestartCatchUp restarts a follower after the others compacted their
// logs past it: it catches up from a snapshot, then from the log.
func TestRestartCatchUp(t *testing.T) {
	c := newCluster(t, 3, 8)
	ctx := testCtx(t)
	f := c.follower(ctx)
	lead := c.waitLeader(ctx)
	var want []string
	appendN := func(n int) {
		for range n {
			body := fmt.Sprintf("r%d", len(want))
			_, err := c.nodes[lead].Shards().Append(ctx, "q", []storage.Record{{Body: []byte(body), Persistent: true}})
			require.NoError(t, err)
			want = append(want, body)
		}
	}
	appendN(10)
	c.stop(f)
	appendN(60) // many snapshots and compactions past the stopped node
	require.NoError(t, c.nodes[lead].PutQueue(ctx, meta.Queue{VHost: "/", Name: "after", Durable: true}))
	n := c.start(f)
	got := readAll(ctx, t, n.Shards(), "q")
	require.Len(t, got, len(want))
	for i, r := range got {
		require.Equal(t, want[i], string(r.Body))
		require.Equal(t, uint64(i), r.Offset)
	}
	_, err := n.GetQueue(ctx, "/", "after")
	require.NoError(t, err)
	// It keeps following from the log.
	appendN(5)
	require.Len(t, readAll(ctx, t, n.Shards(), "q"), len(want))
	// And a restart of the whole cluster keeps everything.
	for i := range c.nodes {
		c.stop(i)
	}
	for i := range c.nodes {
		c.start(i)
	}
	require.Len(t, readAll(ctx, t, c.nodes[f].Shards(), "q"), len(want))
}

// waitFor polls cond until it holds or ctx ends; it is a wait for progress,
// not a timed assertion.
func waitFor(ctx context.Context, t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			require.NoError(t, ctx.Err(), "condition never held")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestSlowLinks runs the cluster over delayed links, one of them dropping
// everything, and checks writes through every node still land once and
// every node converges.
func TestSlowLinks(t *testing.T) {
	c := newCluster(t, 3, 16)
	ctx := testCtx(t)
	for from := uint64(1); from <= 3; from++ {
		for to := uint64(1); to <= 3; to++ {
			if from != to {
				c.net.SetLink(from, to, raft.Link{Delay: time.Duration(from*to) * time.Millisecond})
			}
		}
	}
	lead := c.waitLeader(ctx)
	a, b := (lead+1)%3, (lead+2)%3
	c.net.SetLink(uint64(a+1), uint64(b+1), raft.Link{Drop: true}) // followers never talk anyway
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() {
			for j := range 15 {
				_, err := n.Shards().Append(ctx, "q", []storage.Record{{Body: fmt.Appendf(nil, "n%d-%d", i, j)}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	want := readAll(ctx, t, c.nodes[0].Shards(), "q")
	require.Len(t, want, 45)
	for b, k := range bodies(want) {
		require.Equal(t, 1, k, b)
	}
	for _, n := range c.nodes[1:] {
		require.Equal(t, want, readAll(ctx, t, n.Shards(), "q"))
	}
}

// TestLostStateRebuilds deletes a stopped node's state machine, as a crash
// could leave it behind its log: at restart the node rebuilds it from its
// own snapshot and log.
func TestLostStateRebuilds(t *testing.T) {
	c := newCluster(t, 3, 8)
	ctx := testCtx(t)
	f := c.follower(ctx)
	for i := range 30 {
		_, err := c.nodes[f].Shards().Append(ctx, "q", []storage.Record{{Body: fmt.Appendf(nil, "%d", i), Persistent: true}})
		require.NoError(t, err)
	}
	ok, err := c.nodes[f].CompareAndSwapOffset(ctx, meta.QueueKey{VHost: "/", Name: "q"}, 0, 11)
	require.NoError(t, err)
	require.True(t, ok)
	want := readAll(ctx, t, c.nodes[f].Shards(), "q")
	c.stop(f)
	require.NoError(t, os.RemoveAll(filepath.Join(c.root, fmt.Sprint(f+1), "state")))
	// Cut it off while it starts, so the state it rebuilds comes from its
	// own directory, not from the leader.
	var others []uint64
	for i := range c.nodes {
		if i != f {
			others = append(others, uint64(i+1))
		}
	}
	c.net.Partition([]uint64{uint64(f + 1)}, others)
	n := c.start(f)
	require.NotZero(t, n.AppliedIndex(), "the state was rebuilt from the local snapshot")
	c.net.Heal()
	require.Equal(t, want, readAll(ctx, t, n.Shards(), "q"))
	off, err := n.Offset(ctx, meta.QueueKey{VHost: "/", Name: "q"})
	require.NoError(t, err)
	require.Equal(t, uint64(11), off)
}
