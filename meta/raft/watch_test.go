package raft_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/raft"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

var qk = meta.QueueKey{VHost: "/", Name: "q"}

func key(offset uint64) unacked.Key { return unacked.Key{VHost: "/", Queue: "q", Offset: offset} }

func entry(offset uint64, state unacked.State, count uint32, broker string) unacked.Entry {
	return unacked.Entry{Key: key(offset), Broker: broker, State: state, DeliveryCount: count}
}

// indexOf returns every entry of queue q, for comparing before and after.
func indexOf(ctx context.Context, t *testing.T, x *raft.Index) []unacked.Entry {
	t.Helper()
	var out []unacked.Entry
	require.NoError(t, x.Queue(ctx, "/", "q", func(e unacked.Entry) bool { out = append(out, e); return true }))
	return out
}

// TestClaim runs claims one after another on a single node: each either
// applies whole or reports false and leaves cursor and index as they were.
func TestClaim(t *testing.T) {
	c := newCluster(t, 1, 0)
	ctx := testCtx(t)
	n := c.nodes[0]
	x := n.Unacked()
	ok, err := n.CompareAndSwapOffset(ctx, qk, 0, 5)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, x.Put(ctx, []unacked.Entry{
		entry(1, unacked.Returned, 1, ""), entry(2, unacked.Delivered, 1, "b"), entry(3, unacked.Returned, 2, ""),
	}))
	mine := func(offsets ...uint64) []unacked.Entry {
		var es []unacked.Entry
		for _, o := range offsets {
			es = append(es, entry(o, unacked.Delivered, 1, "me"))
		}
		return es
	}
	tests := []struct {
		name       string
		c          unacked.Claim
		want       bool
		wantCursor uint64
	}{
		{"cursor elsewhere", unacked.Claim{Move: true, From: 4, To: 7, Entries: mine(5, 6)}, false, 5},
		{"taken missing", unacked.Claim{Move: true, From: 5, To: 7, Taken: []unacked.Key{key(1), key(9)}, Entries: mine(1, 5, 6)}, false, 5},
		{"taken delivered", unacked.Claim{Taken: []unacked.Key{key(2)}, Entries: mine(2)}, false, 5},
		{"taken, cursor elsewhere", unacked.Claim{Move: true, From: 6, To: 7, Taken: []unacked.Key{key(1)}, Entries: mine(1)}, false, 5},
		{"move and take", unacked.Claim{Move: true, From: 5, To: 7, Taken: []unacked.Key{key(1)}, Entries: mine(1, 5, 6)}, true, 7},
		{"taken twice", unacked.Claim{Taken: []unacked.Key{key(1)}, Entries: mine(1)}, false, 7},
		{"take only", unacked.Claim{Taken: []unacked.Key{key(3)}, Entries: mine(3)}, true, 7},
		{"move only", unacked.Claim{Move: true, From: 7, To: 9}, true, 9},
		{"move again from the old place", unacked.Claim{Move: true, From: 7, To: 9, Entries: mine(7, 8)}, false, 9},
		{"nothing", unacked.Claim{}, true, 9},
	}
	for _, tt := range tests {
		before := indexOf(ctx, t, x)
		tt.c.VHost, tt.c.Queue = "/", "q"
		ok, err := x.Claim(ctx, tt.c)
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, ok, tt.name)
		off, err := n.Offset(ctx, qk)
		require.NoError(t, err)
		require.Equal(t, tt.wantCursor, off, tt.name)
		after := indexOf(ctx, t, x)
		if !ok {
			require.Equal(t, before, after, "%s: a failed claim writes nothing", tt.name)
			continue
		}
		for _, e := range tt.c.Entries {
			got, err := x.Get(ctx, e.Key)
			require.NoError(t, err, tt.name)
			require.Equal(t, e, got, tt.name)
		}
	}

	ok, err = x.Claim(ctx, unacked.Claim{VHost: "/", Queue: "fresh", Move: true, From: 0, To: 1})
	require.NoError(t, err)
	require.True(t, ok, "an unset cursor is at 0")

	_, err = x.Claim(ctx, unacked.Claim{VHost: "/", Queue: "q", Entries: []unacked.Entry{{Key: key(20)}}})
	require.ErrorContains(t, err, "invalid state")
	ctx2, cancel := context.WithCancel(ctx)
	cancel()
	_, err = x.Claim(ctx2, unacked.Claim{VHost: "/", Queue: "q", Move: true})
	require.ErrorIs(t, err, context.Canceled)
}

// TestClaimRace has claimers on all three nodes race for the same offsets,
// each moving the cursor from where it read it; then for returned
// entries. Every offset and every returned entry is won exactly once, and
// the index holds the winner's entry.
func TestClaimRace(t *testing.T) {
	const total, perNode = 60, 3
	c := newCluster(t, 3, 0)
	ctx := testCtx(t)
	var mu sync.Mutex
	won := map[uint64][]string{}
	var lost atomic.Int64 // claims that found another got there first
	errs := make(chan error, 3*perNode)
	race := func(claim func(n *raft.Node, me string) (offsets []uint64, done bool, err error)) {
		var wg sync.WaitGroup
		for i, n := range c.nodes {
			for g := range perNode {
				me := fmt.Sprintf("n%d-%d", i+1, g)
				wg.Go(func() {
					for {
						offsets, done, err := claim(n, me)
						if err != nil {
							errs <- fmt.Errorf("%s: %w", me, err)
							return
						}
						if done {
							return
						}
						if offsets == nil {
							lost.Add(1)
							continue
						}
						mu.Lock()
						for _, o := range offsets {
							won[o] = append(won[o], me)
						}
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
	}
	check := func(from, to uint64) {
		t.Helper()
		select {
		case err := <-errs:
			require.NoError(t, err)
		default:
		}
		for o := from; o < to; o++ {
			require.Len(t, won[o], 1, "offset %d", o)
			e, err := c.nodes[0].Unacked().Get(ctx, key(o))
			require.NoError(t, err)
			require.Equal(t, won[o][0], e.Broker, "offset %d", o)
			require.Equal(t, unacked.Delivered, e.State)
		}
	}

	race(func(n *raft.Node, me string) ([]uint64, bool, error) {
		cur, err := n.Offset(ctx, qk)
		if err != nil || cur >= total {
			return nil, true, err
		}
		to := min(cur+2, total)
		cl := unacked.Claim{VHost: "/", Queue: "q", Move: true, From: cur, To: to}
		var offsets []uint64
		for o := cur; o < to; o++ {
			offsets = append(offsets, o)
			cl.Entries = append(cl.Entries, entry(o, unacked.Delivered, 1, me))
		}
		ok, err := n.Unacked().Claim(ctx, cl)
		if err != nil || !ok {
			return nil, false, err
		}
		return offsets, false, nil
	})
	check(0, total)
	for _, n := range c.nodes {
		off, err := n.Offset(ctx, qk)
		require.NoError(t, err)
		require.Equal(t, uint64(total), off)
	}

	// Return every entry, then race to take them back, lowest first.
	var returned []unacked.Entry
	for o := range uint64(total) {
		returned = append(returned, entry(o, unacked.Returned, 1, ""))
	}
	require.NoError(t, c.nodes[1].Unacked().Put(ctx, returned))
	clear(won)
	race(func(n *raft.Node, me string) ([]uint64, bool, error) {
		var next *unacked.Entry
		err := n.Unacked().Queue(ctx, "/", "q", func(e unacked.Entry) bool {
			if e.State == unacked.Returned {
				next = &e
				return false
			}
			return true
		})
		if err != nil || next == nil {
			return nil, true, err
		}
		ok, err := n.Unacked().Claim(ctx, unacked.Claim{VHost: "/", Queue: "q", Taken: []unacked.Key{next.Key},
			Entries: []unacked.Entry{entry(next.Offset, unacked.Delivered, 2, me)}})
		if err != nil || !ok {
			return nil, false, err
		}
		return []uint64{next.Offset}, false, nil
	})
	check(0, total)
	t.Logf("%d claims lost a race", lost.Load())
}

// recorder keeps the changes a watcher saw.
type recorder struct {
	mu  sync.Mutex
	got []meta.Change
}

func (r *recorder) add(c meta.Change) {
	r.mu.Lock()
	r.got = append(r.got, c)
	r.mu.Unlock()
}

func (r *recorder) changes() []meta.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// TestWatch makes writes of every kind on node 1 and checks that every
// node's watcher sees the same changes in the same order; after cancel
// nothing arrives.
func TestWatch(t *testing.T) {
	c := newCluster(t, 3, 0)
	ctx := testCtx(t)
	recs := make([]*recorder, len(c.nodes))
	cancels := make([]func(), len(c.nodes))
	for i, n := range c.nodes {
		recs[i] = &recorder{}
		cancels[i] = n.Watch(recs[i].add)
	}

	// Each topology write names its own vhost and only one append is made,
	// so however the followers batch the entries nothing is merged.
	n := c.nodes[0]
	x := n.Unacked()
	steps := []struct {
		name  string
		write func() error
		want  []meta.Change
	}{
		{"vhost", func() error { return n.PutVHost(ctx, meta.VHost{Name: "a"}) },
			[]meta.Change{{Kind: meta.ChangeTopology}}},
		{"exchange", func() error { return n.PutExchange(ctx, meta.Exchange{VHost: "b", Name: "x", Type: "direct"}) },
			[]meta.Change{{Kind: meta.ChangeTopology, VHost: "b"}}},
		{"publish", func() error {
			_, err := n.Shards().Append(ctx, "s", []storage.Record{{Body: []byte("1")}, {Body: []byte("2")}})
			return err
		}, []meta.Change{{Kind: meta.ChangeAppended, Shard: "s", Offset: 2}}},
		{"cas", func() error {
			ok, err := n.CompareAndSwapOffset(ctx, qk, 0, 1)
			require.True(t, ok)
			return err
		}, []meta.Change{{Kind: meta.ChangeCursor, VHost: "/", Queue: "q", Offset: 1}}},
		{"returned", func() error { return x.Put(ctx, []unacked.Entry{entry(0, unacked.Returned, 1, "")}) },
			[]meta.Change{{Kind: meta.ChangeReturned, VHost: "/", Queue: "q", Offset: 0, DeliveryCount: 1}}},
		{"claim", func() error {
			ok, err := x.Claim(ctx, unacked.Claim{VHost: "/", Queue: "q", Move: true, From: 1, To: 2, Taken: []unacked.Key{key(0)},
				Entries: []unacked.Entry{entry(0, unacked.Delivered, 2, "n1"), entry(1, unacked.Delivered, 1, "n1")}})
			require.True(t, ok)
			return err
		}, []meta.Change{{Kind: meta.ChangeTaken, VHost: "/", Queue: "q", Offset: 0}, {Kind: meta.ChangeCursor, VHost: "/", Queue: "q", Offset: 2}}},
		{"failed claim", func() error {
			ok, err := x.Claim(ctx, unacked.Claim{VHost: "/", Queue: "q", Move: true, From: 1, To: 2})
			require.False(t, ok)
			return err
		}, nil},
		{"requeue", func() error { return x.Put(ctx, []unacked.Entry{entry(1, unacked.Returned, 2, "")}) },
			[]meta.Change{{Kind: meta.ChangeReturned, VHost: "/", Queue: "q", Offset: 1, DeliveryCount: 2}}},
		{"delete returned", func() error { return x.Delete(ctx, []unacked.Key{key(1), key(0)}) },
			[]meta.Change{{Kind: meta.ChangeTaken, VHost: "/", Queue: "q", Offset: 1}}},
		{"queue", func() error { return n.PutQueue(ctx, meta.Queue{VHost: "c", Name: "q"}) },
			[]meta.Change{{Kind: meta.ChangeTopology, VHost: "c"}}},
		{"unbind", func() error {
			return n.DeleteBinding(ctx, meta.Binding{VHost: "d", Source: "x", Destination: "q", DestinationKind: meta.DestinationQueue})
		}, []meta.Change{{Kind: meta.ChangeTopology, VHost: "d"}}},
		{"policy", func() error { return n.PutPolicy(ctx, meta.Policy{VHost: "e", Name: "p"}, false) },
			[]meta.Change{{Kind: meta.ChangePolicy, VHost: "e"}}},
		{"operator policy deleted", func() error { return n.DeletePolicy(ctx, "f", "p", true) },
			[]meta.Change{{Kind: meta.ChangePolicy, VHost: "f"}}},
	}
	var want []meta.Change
	for _, s := range steps {
		require.NoError(t, s.write(), s.name)
		want = append(want, s.want...)
		// The writer's own node delivered before the write returned.
		require.Equal(t, want, recs[0].changes(), s.name)
	}
	for i, r := range recs {
		waitFor(ctx, t, func() bool { return len(r.changes()) >= len(want) })
		require.Equal(t, want, r.changes(), "node %d", i+1)
	}

	for _, cancel := range cancels {
		cancel()
		cancel() // idempotent
	}
	require.NoError(t, n.PutVHost(ctx, meta.VHost{Name: "after"}))
	for i, n := range c.nodes {
		_, err := n.GetVHost(ctx, "after") // linearizable: applied here
		require.NoError(t, err)
		require.Equal(t, want, recs[i].changes(), "node %d: nothing after cancel", i+1)
	}
}

// TestWatchCancelWaits cancels a watcher from another goroutine while its
// fn runs: cancel returns only after fn returned, and fn is not called
// again.
func TestWatchCancelWaits(t *testing.T) {
	c := newCluster(t, 1, 0)
	ctx := testCtx(t)
	n := c.nodes[0]
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	var returned atomic.Bool
	cancel := n.Watch(func(meta.Change) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
			returned.Store(true)
		}
	})
	writeErr := make(chan error, 1)
	go func() { writeErr <- n.PutVHost(ctx, meta.VHost{Name: "a"}) }()
	<-entered
	cancelled := make(chan bool, 1)
	go func() {
		cancel()
		cancelled <- returned.Load()
	}()
	// Give cancel a chance to reach its wait before fn is released; the
	// result holds whichever ran first.
	for range 100 {
		runtime.Gosched()
	}
	close(release)
	require.True(t, <-cancelled, "cancel returned while fn ran")
	require.NoError(t, <-writeErr)
	require.NoError(t, n.PutVHost(ctx, meta.VHost{Name: "b"}))
	require.Equal(t, int32(1), calls.Load())
}

// TestWatchReset: a node that missed compacted entries receives a
// snapshot, and its watcher is told ChangeReset before the changes that
// follow.
func TestWatchReset(t *testing.T) {
	c := newCluster(t, 3, 8)
	ctx := testCtx(t)
	lead := c.waitLeader(ctx)
	f := c.follower(ctx)
	c.stop(f)
	for i := range 40 {
		_, err := c.nodes[lead].Shards().Append(ctx, "s", []storage.Record{{Body: []byte(fmt.Sprint(i))}})
		require.NoError(t, err)
	}
	// Cut the follower off until its watcher is in place, so the snapshot
	// arrives after Watch.
	fid := uint64(f + 1)
	var others []uint64
	for i := range c.nodes {
		if i != f {
			others = append(others, uint64(i+1))
		}
	}
	c.net.Partition(others, []uint64{fid})
	rec := &recorder{}
	cancel := c.start(f).Watch(rec.add)
	defer cancel()
	c.net.Heal()
	_, err := c.nodes[lead].Shards().Append(ctx, "after", []storage.Record{{Body: []byte("x")}})
	require.NoError(t, err)
	appendedAfter := meta.Change{Kind: meta.ChangeAppended, Shard: "after", Offset: 1}
	waitFor(ctx, t, func() bool { return slices.Contains(rec.changes(), appendedAfter) })
	got := rec.changes()
	require.Equal(t, meta.Change{Kind: meta.ChangeReset}, got[0])
	require.Equal(t, appendedAfter, got[len(got)-1])
}

// BenchmarkClaim measures claims through a follower of a 3-node cluster,
// one claimer moving the cursor by batch offsets and writing batch
// entries per op, with a watcher on every node and without.
func BenchmarkClaim(b *testing.B) {
	for _, watched := range []bool{false, true} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("watched=%v/batch=%d", watched, batch), func(b *testing.B) {
				c := newCluster(b, 3, 0)
				ctx := context.Background()
				if watched {
					for _, n := range c.nodes {
						defer n.Watch(func(meta.Change) {})()
					}
				}
				x := c.nodes[c.follower(ctx)].Unacked()
				cl := unacked.Claim{VHost: "/", Queue: "q", Move: true, Entries: make([]unacked.Entry, batch)}
				b.ReportAllocs()
				for b.Loop() {
					cl.To = cl.From + uint64(batch)
					for i := range cl.Entries {
						cl.Entries[i] = entry(cl.From+uint64(i), unacked.Delivered, 1, "bench")
					}
					ok, err := x.Claim(ctx, cl)
					if err != nil || !ok {
						b.Fatalf("claim: %v %v", ok, err)
					}
					cl.From = cl.To
				}
			})
		}
	}
}
