package raft

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// startRecovered is Start with a panic (raft's reaction to a log that
// breaks its invariants) turned into an error, so a test can report it.
func startRecovered(cfg Config) (n *Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("start panicked: %v", r)
		}
	}()
	return Start(cfg)
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// crashConfig is a node of a crash test: fast ticks (the test kills and
// restarts many times) and frequent snapshots, so that crashes also land
// around snapshots and compactions.
func crashConfig(id uint64, peers []Peer, tr Transport) Config {
	return Config{
		ID: id, Dir: fmt.Sprintf("/n%d", id), Peers: peers, Transport: tr,
		TickInterval: 10 * time.Millisecond, ElectionTicks: 30, HeartbeatTicks: 3,
		SnapshotEvery: 40,
	}
}

// TestCrashAnywhereRestarts kills a follower at many points of its Ready
// loop (after persisting, after applying, after snapshotting, after
// restoring a snapshot), each time keeping a random part of what it had
// not synced in each DB: the log DB's unsynced commit index can be lost
// while the state DB's unsynced applied index survives, and the other way
// round. Every restart must succeed and catch up, and at the end every
// node holds the same state.
func TestCrashAnywhereRestarts(t *testing.T) {
	const victim = 3
	net := NewNetwork()
	t.Cleanup(net.Close)
	peers := []Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	nodes := make([]*Node, 3)
	fss := make([][2]*vfs.MemFS, 3)
	for i := range nodes {
		fss[i] = [2]*vfs.MemFS{vfs.NewCrashableMem(), vfs.NewCrashableMem()}
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Stop()
			}
		}
	})
	type crash struct {
		point     string
		log, stat *vfs.MemFS
	}
	var (
		armed   atomic.Pointer[string] // the point to crash at
		left    atomic.Int64           // visits of it before crashing
		crashed = make(chan crash, 1)
		rng     = rand.New(rand.NewPCG(1, 2))
		rngMu   sync.Mutex
		keep    [2]int // percent of unsynced data kept: log, state
	)
	hook := func(n *Node, point string) {
		p := armed.Load()
		if p == nil || *p != point || left.Add(-1) != 0 {
			return
		}
		armed.Store(nil)
		// A crashed node sends nothing more: cut it off first, then
		// take the disks as they are at this instant.
		for _, o := range []uint64{1, 2} {
			net.SetLink(victim, o, Link{Drop: true})
		}
		rngMu.Lock()
		defer rngMu.Unlock()
		if keep[1] == 100 {
			// The OS may have written back everything the state DB
			// wrote, the batch just applied included.
			require.NoError(t, n.state.LogData(nil, pebble.Sync))
		}
		log := fss[victim-1][0].CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep[0], RNG: rng})
		stat := fss[victim-1][1].CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep[1], RNG: rng})
		crashed <- crash{point: point, log: log, stat: stat}
	}
	start := func(id uint64) {
		cfg := crashConfig(id, peers, net.Transport(id))
		cfg.Logger = slog.New(slog.NewTextHandler(tlogWriter{t}, nil))
		cfg.faults.logFS, cfg.faults.stateFS = fss[id-1][0], fss[id-1][1]
		if id == victim {
			cfg.faults.at = hook
		}
		n, err := startRecovered(cfg)
		require.NoError(t, err, "node %d", id)
		nodes[id-1] = n
	}
	for id := uint64(1); id <= 3; id++ {
		start(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, nodes[0].Campaign(ctx))

	// The load: vhosts v0, v1, ... written one after another through
	// whichever of nodes 1 and 2 answers.
	var written atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stopOnce sync.Once
	stopLoad := func() {
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}
	defer stopLoad()
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			if nodes[i%2].PutVHost(wctx, meta.VHost{Name: fmt.Sprintf("v%06d", i)}) == nil {
				written.Add(1)
			}
			cancel()
		}
	})

	points := []string{"persisted", "applied", "applied", "snapshotted", "restored"}
	keeps := [][2]int{{0, 100}, {0, 100}, {0, 0}, {100, 0}, {50, 50}, {0, 50}}
	const crashes = 20
	for i := range crashes {
		point := points[i%len(points)]
		rngMu.Lock()
		keep = keeps[i%len(keeps)]
		visits := 1 + rng.Int64N(8)
		rngMu.Unlock()
		if point == "restored" {
			// Make the victim need a snapshot: keep it away while the
			// others write past a snapshot and compact their logs.
			for _, o := range []uint64{1, 2} {
				net.SetLink(o, victim, Link{Drop: true})
			}
			w := written.Load()
			require.Eventually(t, func() bool { return written.Load() >= w+60 }, time.Minute, time.Millisecond)
			visits = 1
		}
		left.Store(visits)
		armed.Store(&point)
		if point == "restored" {
			net.Heal()
		}
		var c crash
		select {
		case c = <-crashed:
		case <-time.After(time.Minute):
			t.Fatalf("crash %d: the victim never reached point %q", i, point)
		}
		require.NoError(t, nodes[victim-1].Stop())
		nodes[victim-1] = nil
		fss[victim-1] = [2]*vfs.MemFS{c.log, c.stat}
		net.Heal()
		start(victim)
		// It catches up: a linearizable read on it returns.
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := nodes[victim-1].ListVHosts(rctx)
		cancel()
		require.NoError(t, err, "crash %d at %q keeping %v%% of unsynced data: the restarted node does not serve", i, c.point, keep)
	}
	stopLoad()
	require.Positive(t, written.Load())

	// Every node ends with the same vhosts.
	var views [][]meta.VHost
	for _, n := range nodes {
		vs, err := n.ListVHosts(ctx)
		require.NoError(t, err)
		views = append(views, vs)
	}
	require.Equal(t, views[0], views[1])
	require.Equal(t, views[0], views[2])
	t.Logf("%d crashes, %d vhosts written, %d stored", crashes, written.Load(), len(views[0]))
}

// TestRestartAfterLostCommit builds the data directory a crash leaves when
// it loses the log DB's unsynced commit index but keeps the state DB's
// unsynced applied index, and starts a node from it: it must come up
// (etcd raft's RestartNode panicked on it) with its state intact.
func TestRestartAfterLostCommit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit func(applied, snap uint64) uint64
	}{
		{"one behind", func(applied, _ uint64) uint64 { return applied - 1 }},
		{"back to the snapshot", func(_, snap uint64) uint64 { return snap }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			net := NewNetwork()
			defer net.Close()
			dir := t.TempDir()
			cfg := Config{
				ID: 1, Dir: dir, Peers: []Peer{{ID: 1}}, Transport: net.Transport(1),
				TickInterval: 10 * time.Millisecond, SnapshotEvery: 8,
			}
			n, err := Start(cfg)
			require.NoError(t, err)
			require.NoError(t, n.Campaign(ctx))
			const vhosts = 21
			for i := range vhosts {
				require.NoError(t, n.PutVHost(ctx, meta.VHost{Name: fmt.Sprint("v", i)}))
			}
			require.NoError(t, n.Stop())

			// Move the stored commit index back, below the applied index.
			log, err := openLogStore(filepath.Join(dir, "log"), pebbleOptions(nil))
			require.NoError(t, err)
			snap, hs, _, err := log.load()
			require.NoError(t, err)
			state, err := pebble.Open(filepath.Join(dir, "state"), pebbleOptions(nil))
			require.NoError(t, err)
			applied, err := getU64(state, keyApplied)
			require.NoError(t, err)
			require.NoError(t, state.Close())
			snapIndex := snap.GetMetadata().GetIndex()
			require.Positive(t, snapIndex)
			commit := tc.commit(applied, snapIndex)
			require.Less(t, commit, applied)
			hs.Commit = &commit
			require.NoError(t, log.save(hs, nil, nil, true))
			require.NoError(t, log.close())

			cfg.Transport = net.Transport(1)
			n, err = startRecovered(cfg)
			require.NoError(t, err)
			defer n.Stop()
			require.Equal(t, applied, n.AppliedIndex())
			vs, err := n.ListVHosts(ctx)
			require.NoError(t, err)
			require.Len(t, vs, vhosts)
			require.NoError(t, n.PutVHost(ctx, meta.VHost{Name: "after"}))
			vs, err = n.ListVHosts(ctx)
			require.NoError(t, err)
			require.Len(t, vs, vhosts+1)
		})
	}
}
