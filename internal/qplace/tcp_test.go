package qplace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/multiraft"
)

// TestGrowOntoNewMemberOverTCP grows a group of members 1 and 2 onto
// member 3, which joins the cluster while it runs: 1 and 2 learn its
// address (AddPeer), it creates its empty replica, Grow adds it as a
// learner and promotes it once current. Then `shrink 3` takes it out
// again and the others forget it (RemovePeer). The group commits
// throughout.
func TestGrowOntoNewMemberOverTCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	secret := []byte("qplace test cluster secret, 32 b")
	dir := t.TempDir()
	addrs := map[uint64]string{}
	ls := map[uint64]net.Listener{}
	for id := uint64(1); id <= 3; id++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls[id], addrs[id] = l, l.Addr().String()
	}
	trs := map[uint64]*multiraft.TCPTransport{}
	es := map[uint64]*multiraft.Engine{}
	sms := map[uint64]*counter{}
	for id := uint64(1); id <= 3; id++ {
		peers := map[uint64]string{}
		for p, a := range addrs {
			if p != id && (id == 3 || p != 3) { // 1 and 2 do not know 3 yet
				peers[p] = a
			}
		}
		tr, err := multiraft.NewTCP(multiraft.TCPConfig{ID: id, Listener: ls[id], Peers: peers, Secret: secret, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		sm := &counter{}
		e, err := multiraft.New(multiraft.Config{
			ID: id, Dir: filepath.Join(dir, fmt.Sprint(id)), Transport: tr, TickInterval: tick,
			NewStateMachine: func(uint64) multiraft.StateMachine { return sm },
		})
		require.NoError(t, err)
		trs[id], es[id], sms[id] = tr, e, sm
	}
	defer func() {
		for id := uint64(1); id <= 3; id++ {
			es[id].Close()
			trs[id].Close()
		}
	}()

	const g = 1
	for _, id := range []uint64{1, 2} {
		require.NoError(t, es[id].CreateGroup(ctx, g, []uint64{1, 2}))
	}
	require.NoError(t, es[1].Campaign(ctx, g))

	var committed atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() {
		for wctx.Err() == nil {
			pctx, cancel := context.WithTimeout(wctx, 3*time.Second)
			_, err := es[2].Propose(pctx, g, []byte("m"))
			cancel()
			switch {
			case err == nil:
				committed.Add(1)
			case wctx.Err() != nil:
			case errorsIsRetry(err):
				time.Sleep(tick)
			default:
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	waitMore := func(what string) {
		n := committed.Load()
		require.Eventually(t, func() bool { return committed.Load() >= n+20 }, 30*time.Second, tick, "commits continue after %s", what)
	}
	waitMore("start")

	require.NoError(t, es[3].CreateGroup(ctx, g, nil))
	for _, id := range []uint64{1, 2} {
		trs[id].AddPeer(3, addrs[3])
	}
	leader := leaderIn(ctx, t, es[2], g)
	require.NoError(t, Grow(ctx, es[leader], g, 3, tick))
	gi, err := info(ctx, es[leader], g)
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3}, gi.Voters)
	waitMore("the grow")
	require.Eventually(t, func() bool { return sms[3].n.Load() >= uint64(committed.Load()) }, 30*time.Second, tick, "the new replica catches up")

	remove, refused := PlanShrink(mustInfos(t, es[2]), 3)
	require.Equal(t, []uint64{g}, remove)
	require.Empty(t, refused)
	require.NoError(t, Shrink(ctx, es[2], g, 3))
	require.Eventually(t, func() bool {
		gi, err := info(ctx, es[2], g)
		return err == nil && fmt.Sprint(gi.Voters) == "[1 2]"
	}, 30*time.Second, tick)
	for _, id := range []uint64{1, 2} {
		trs[id].RemovePeer(3)
	}
	require.NoError(t, es[3].RemoveGroup(ctx, g))
	waitMore("the shrink")
	stop()
	require.NoError(t, <-werr)
}

func errorsIsRetry(err error) bool {
	return errors.Is(err, multiraft.ErrNoLeader) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, multiraft.ErrLeaderChanged) || errors.Is(err, multiraft.ErrProposalLost)
}

// leaderIn waits for group g's leader as e sees it.
func leaderIn(ctx context.Context, t *testing.T, e *multiraft.Engine, g uint64) uint64 {
	for {
		gi, err := info(ctx, e, g)
		require.NoError(t, err)
		if gi.Leader != 0 {
			return gi.Leader
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %d elects no leader", g)
		case <-time.After(tick):
		}
	}
}
