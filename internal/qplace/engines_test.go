package qplace

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/multiraft"
)

// counter is a state machine counting the commands it applied; the count
// is kept in its group's data, so a restart goes on from it.
type counter struct{ n atomic.Uint64 }

var counterKey = []byte("n")

func (c *counter) Load(d *multiraft.Data) error {
	v, ok, err := d.Get(counterKey)
	if err != nil || !ok {
		return err
	}
	return c.decode(v)
}

func (c *counter) Apply(b *multiraft.Batch, _ uint64, _ []byte) []byte {
	n := c.n.Add(1)
	if err := b.Set(counterKey, binary.AppendUvarint(nil, n)); err != nil {
		panic(err) // a batch refusing a write is a broken test setup
	}
	return nil
}

func (c *counter) Committed() {}

func (c *counter) Snapshot(w io.Writer) error {
	_, err := w.Write(binary.AppendUvarint(nil, c.n.Load()))
	return err
}

func (c *counter) Restore(b *multiraft.Batch, snap []byte) error {
	if len(snap) == 0 {
		c.n.Store(0)
		return nil
	}
	if err := c.decode(snap); err != nil {
		return err
	}
	return b.Set(counterKey, snap)
}

func (c *counter) decode(b []byte) error {
	v, k := binary.Uvarint(b)
	if k <= 0 {
		return errors.New("bad counter snapshot")
	}
	c.n.Store(v)
	return nil
}

// tick is the tests' raft tick: a 500 ms election timeout.
const tick = 50 * time.Millisecond

// cluster is real multiraft engines on an in-memory network, each with
// its rebalancer when started.
type cluster struct {
	t   *testing.T
	net *multiraft.MemNetwork
	dir string

	mu    sync.Mutex
	es    map[uint64]*multiraft.Engine
	sms   map[uint64]map[uint64]*counter
	rebal map[uint64]*Rebalancer
}

func newCluster(t *testing.T, n int) *cluster {
	c := &cluster{t: t, net: multiraft.NewMemNetwork(), dir: t.TempDir(),
		es: map[uint64]*multiraft.Engine{}, sms: map[uint64]map[uint64]*counter{}, rebal: map[uint64]*Rebalancer{}}
	trs := map[uint64]multiraft.Transport{}
	for id := uint64(1); id <= uint64(n); id++ {
		trs[id] = c.net.Transport(id)
	}
	for id := uint64(1); id <= uint64(n); id++ {
		c.start(id, trs[id])
	}
	t.Cleanup(c.close)
	return c
}

func (c *cluster) start(id uint64, tr multiraft.Transport) {
	sms := map[uint64]*counter{}
	var smu sync.Mutex
	e, err := multiraft.New(multiraft.Config{
		ID: id, Dir: filepath.Join(c.dir, fmt.Sprint(id)), Transport: tr, TickInterval: tick, SnapshotEntries: 64,
		NewStateMachine: func(g uint64) multiraft.StateMachine {
			sm := &counter{}
			smu.Lock()
			sms[g] = sm
			smu.Unlock()
			return sm
		},
	})
	require.NoError(c.t, err)
	c.mu.Lock()
	c.es[id], c.sms[id] = e, sms
	c.mu.Unlock()
}

func (c *cluster) engine(id uint64) *multiraft.Engine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.es[id]
}

// view merges the views of the engines running, as the metadata group
// would give every member.
func (c *cluster) view(ctx context.Context) (View, error) {
	c.mu.Lock()
	es := make([]*multiraft.Engine, 0, len(c.es))
	for _, e := range c.es {
		es = append(es, e)
	}
	c.mu.Unlock()
	var vs []View
	for _, e := range es {
		v, err := LocalView(e)(ctx)
		if errors.Is(err, multiraft.ErrClosed) {
			continue // killed meanwhile
		}
		if err != nil {
			return View{}, err
		}
		vs = append(vs, v)
	}
	return MergeViews(vs...), nil
}

func (c *cluster) startRebalancer(id uint64) {
	r, err := StartRebalancer(RebalancerConfig{
		Engine: c.engine(id), View: c.view,
		Interval: 500 * time.Millisecond, Settle: 500 * time.Millisecond, Check: 100 * time.Millisecond,
	})
	require.NoError(c.t, err)
	c.mu.Lock()
	c.rebal[id] = r
	c.mu.Unlock()
}

// kill stops member id's rebalancer and engine and takes it off the
// network, as its process dying would.
func (c *cluster) kill(id uint64) {
	c.mu.Lock()
	r, e := c.rebal[id], c.es[id]
	delete(c.rebal, id)
	delete(c.es, id)
	c.mu.Unlock()
	if r != nil {
		r.Stop()
	}
	c.net.Remove(id)
	require.NoError(c.t, e.Close())
}

func (c *cluster) close() {
	c.mu.Lock()
	rs, es := c.rebal, c.es
	c.rebal, c.es = map[uint64]*Rebalancer{}, map[uint64]*multiraft.Engine{}
	c.mu.Unlock()
	for _, r := range rs {
		r.Stop()
	}
	for _, e := range es {
		e.Close()
	}
	c.net.Close()
}

// leaders counts the groups each running member leads, by the leaders'
// own account.
func (c *cluster) leaders(ctx context.Context) map[uint64]int {
	v, err := c.view(ctx)
	require.NoError(c.t, err)
	out := map[uint64]int{}
	for _, g := range v.Groups {
		if g.Leader != 0 {
			out[g.Leader]++
		}
	}
	return out
}

// create makes a group of the placement's replicas and has its chosen
// leader campaign, as the wiring does after writing the placement.
func (c *cluster) create(ctx context.Context, g uint64, p Placement) {
	for _, m := range p.Replicas {
		require.NoError(c.t, c.engine(m).CreateGroup(ctx, g, p.Replicas))
	}
	require.NoError(c.t, c.engine(p.Leader).Campaign(ctx, g))
}

// propose commits one command in group g through member via, retrying
// while the group elects.
func (c *cluster) propose(ctx context.Context, via, g uint64) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := c.engine(via).Propose(pctx, g, []byte("m"))
		cancel()
		if err == nil || ctx.Err() != nil || !errorsIsRetry(err) {
			return err
		}
		time.Sleep(tick)
	}
}

func balanced(counts map[uint64]int, members []uint64, limit int) bool {
	for _, m := range members {
		if counts[m] > limit {
			return false
		}
	}
	return true
}

// TestThirtyQueuesOnThreeMembers places 30 groups on 3 engines with the
// balanced locator (counts from the cluster's view as each is placed):
// no member leads more than 11. Then one member is killed, its groups
// elect elsewhere (two members now lead 15 each), it restarts, and the
// rebalancers bring every member back to at most 11 within a minute.
func TestThirtyQueuesOnThreeMembers(t *testing.T) {
	const groups = 30
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCluster(t, 3)
	members := []uint64{1, 2, 3}
	limit := Limit(groups, len(members))
	require.Equal(t, 11, limit)

	// Every declaration arrives at member 1, as from clients connected
	// to it: balanced still spreads the leaders.
	for g := uint64(1); g <= groups; g++ {
		v, err := c.view(ctx)
		require.NoError(t, err)
		p, err := Place(members, v.Live, Loads(v), 0, Balanced, 1)
		require.NoError(t, err)
		require.Equal(t, members, p.Replicas)
		c.create(ctx, g, p)
		require.Eventually(t, func() bool {
			st, err := c.engine(p.Leader).Status(ctx, g)
			return err == nil && st.IsLeader
		}, 30*time.Second, tick, "group %d elects its placed leader %d", g, p.Leader)
	}
	counts := c.leaders(ctx)
	t.Logf("placed: %v", counts)
	require.True(t, balanced(counts, members, limit), "placed leaders %v", counts)

	for _, id := range members {
		c.startRebalancer(id)
	}
	for g := uint64(1); g <= groups; g++ {
		require.NoError(t, c.propose(ctx, 1+g%3, g))
	}

	const victim = 3
	c.kill(victim)
	require.Eventually(t, func() bool {
		counts := c.leaders(ctx)
		return counts[1]+counts[2] == groups
	}, time.Minute, tick, "the victim's groups elect elsewhere")
	counts = c.leaders(ctx)
	t.Logf("victim down: %v", counts)
	require.False(t, balanced(counts, []uint64{1, 2}, limit), "two members hold all 30: more than %d for one", limit)
	// The groups keep committing without it.
	for g := uint64(1); g <= groups; g++ {
		require.NoError(t, c.propose(ctx, 1+g%2, g))
	}

	c.start(victim, c.net.Transport(victim))
	c.startRebalancer(victim)
	back := time.Now()
	require.Eventually(t, func() bool {
		return balanced(c.leaders(ctx), members, limit)
	}, time.Minute, 100*time.Millisecond, "balance returns within a minute of the restart")
	counts = c.leaders(ctx)
	t.Logf("rebalanced %v after the restart: %v", time.Since(back).Round(100*time.Millisecond), counts)
	require.Positive(t, counts[victim], "the member that came back leads again")
	for g := uint64(1); g <= groups; g++ {
		require.NoError(t, c.propose(ctx, victim, g))
	}
}

// TestRebalancerSpreadsSkewedLeaders starts from every group led by one
// member (client-local declarations all on it) and lets the rebalancers
// spread them.
func TestRebalancerSpreadsSkewedLeaders(t *testing.T) {
	const groups = 12
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newCluster(t, 3)
	members := []uint64{1, 2, 3}
	for g := uint64(1); g <= groups; g++ {
		p, err := Place(members, nil, nil, 3, ClientLocal, 2)
		require.NoError(t, err)
		require.Equal(t, uint64(2), p.Leader)
		c.create(ctx, g, p)
	}
	require.Eventually(t, func() bool { return c.leaders(ctx)[2] == groups }, 30*time.Second, tick)
	for _, id := range members {
		c.startRebalancer(id)
	}
	require.Eventually(t, func() bool {
		counts := c.leaders(ctx)
		return counts[1] == 4 && counts[2] == 4 && counts[3] == 4
	}, time.Minute, 100*time.Millisecond, "leaders spread evenly")
}

// TestGrowShrinkKeepsCommitting grows a 3-replica group onto a fourth
// member and then shrinks its original leader out of it while a writer
// commits through the group all along; every commit after each change
// lands, and the new replica holds the whole state.
func TestGrowShrinkKeepsCommitting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newCluster(t, 4)
	const g = 7
	p, err := Place([]uint64{1, 2, 3, 4}, nil, map[uint64]Load{4: {Replicas: 5}}, 3, ClientLocal, 1)
	require.NoError(t, err)
	require.Equal(t, Placement{Replicas: []uint64{1, 2, 3}, Leader: 1}, p)
	c.create(ctx, g, p)

	var committed atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() {
		for wctx.Err() == nil {
			if err := c.propose(wctx, 2, g); err != nil && wctx.Err() == nil {
				werr <- err
				return
			}
			committed.Add(1)
		}
		werr <- nil
	}()
	waitMore := func(what string) {
		n := committed.Load()
		require.Eventually(t, func() bool { return committed.Load() >= n+20 }, 30*time.Second, tick, "commits continue after %s", what)
	}
	waitMore("start")

	gs, err := c.engine(1).GroupInfos(ctx)
	require.NoError(t, err)
	require.Equal(t, []uint64{g}, PlanGrow(gs, 4, GrowAll))
	require.Empty(t, PlanGrow(gs, 4, GrowEven), "3 replicas is odd")

	require.NoError(t, c.engine(4).CreateGroup(ctx, g, nil))
	leader := leaderIn(ctx, t, c.engine(2), g)
	require.NoError(t, Grow(ctx, c.engine(leader), g, 4, tick))
	require.Eventually(t, func() bool {
		gi, err := info(ctx, c.engine(leader), g)
		return err == nil && len(gi.Voters) == 4
	}, 30*time.Second, tick)
	waitMore("the grow")

	remove, refused := PlanShrink(mustInfos(t, c.engine(2)), 1)
	require.Equal(t, []uint64{g}, remove)
	require.Empty(t, refused)
	require.NoError(t, Shrink(ctx, c.engine(2), g, 1))
	require.Eventually(t, func() bool {
		gi, err := info(ctx, c.engine(2), g)
		return err == nil && fmt.Sprint(gi.Voters) == "[2 3 4]"
	}, 30*time.Second, tick)
	require.NoError(t, c.engine(1).RemoveGroup(ctx, g))
	waitMore("the shrink")

	stop()
	require.NoError(t, <-werr)
	// Replicas converge: member 4 holds what member 2 applied.
	var a, b atomic.Uint64 // read after Eventually, whose checks run on their own goroutine
	converged := assert.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		a.Store(c.sms[2][g].n.Load())
		b.Store(c.sms[4][g].n.Load())
		return a.Load() == b.Load() && a.Load() >= uint64(committed.Load())
	}, 30*time.Second, tick, "the grown replica converges")
	if !converged {
		t.Fatalf("member 2 applied %d commands, member 4 %d; %d committed", a.Load(), b.Load(), committed.Load())
	}

	// The last replica is never removed.
	require.ErrorIs(t, Shrink(ctx, fakeSolo{c.engine(2)}, g, 2), ErrLastReplica)
}

func mustInfos(t *testing.T, e Engine) []multiraft.GroupInfo {
	gs, err := e.GroupInfos(context.Background())
	require.NoError(t, err)
	return gs
}

// fakeSolo shows a group with one voter, this member, to test the
// refusal without shrinking a real group to one replica.
type fakeSolo struct{ *multiraft.Engine }

func (f fakeSolo) GroupInfos(ctx context.Context) ([]multiraft.GroupInfo, error) {
	gs, err := f.Engine.GroupInfos(ctx)
	for i := range gs {
		gs[i].Voters = []uint64{f.ID()}
	}
	return gs, err
}
