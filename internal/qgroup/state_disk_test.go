package qgroup

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/multiraft"
)

// backlog appends n records of size bytes to group g, per records a
// command, and returns them with their offsets.
func backlog(t testing.TB, te *testEngine, g uint64, n, per, size int) []storage.Record {
	var all []storage.Record
	for len(all) < n {
		recs := make([]storage.Record, min(per, n-len(all)))
		for i := range recs {
			recs[i] = storage.Record{Body: bytes.Repeat([]byte{byte(len(all) + i)}, size), RoutingKey: fmt.Sprint(len(all) + i), Persistent: true}
		}
		out := te.apply(t, g, appendCommand(recs))
		require.Len(t, out, 8)
		for i := range recs {
			recs[i].Offset = uint64(len(all) + i)
		}
		all = append(all, recs...)
	}
	return all
}

// snapshotOf is what a state says of itself, to compare replicas.
type snapshotOf struct {
	recs    []storage.Record
	entries []unacked.Entry
	cursor  uint64
	count   uint64
	first   uint64
}

func stateOf(t testing.TB, s *state) snapshotOf {
	return snapshotOf{recs: mustRead(t, s, 0, 1<<30), entries: s.entriesSorted(), cursor: s.offset(), count: s.count(), first: s.firstOffset()}
}

// TestRestartAfterCrashWithBacklog crashes a member holding a queue with
// a backlog of 10,000 records (its file system keeps only what was
// synced, as after a power cut; the engine is never closed) and starts it
// again: every confirmed record, the cursor and the unacked entries are
// there, and the restart applied only the entries after the state's
// applied record — not the backlog, and no snapshot restore.
func TestRestartAfterCrashWithBacklog(t *testing.T) {
	fs := vfs.NewCrashableMem()
	const every = 64
	// A directory at the root of the file system: creating it syncs its
	// parent, so it outlives the crash.
	te := &testEngine{t: t, dir: "/member1", net: multiraft.NewMemNetwork(), feed: &feed{},
		cfg: func(c *multiraft.Config) { c.FS, c.SnapshotEntries = fs, every }}
	te.start()
	defer func() { te.e.Close(); te.net.Close() }()
	s := te.group(t, 1)
	all := backlog(t, te, 1, 10000, 40, 1024) // 250 entries
	te.apply(t, 1, offsetsCommand(opDelOffsets, []uint64{0, 1, 2, 5}))
	require.Equal(t, boolResult[1], te.apply(t, 1, casCommand(0, 7)))
	te.apply(t, 1, putCommand([]unacked.Entry{entry(3, unacked.Delivered), entry(4, unacked.Returned)}))
	want := stateOf(t, s)
	require.Len(t, want.recs, len(all)-4)
	require.Equal(t, uint64(3), want.first)
	applied := te.e.Stats().Applied
	require.GreaterOrEqual(t, applied, uint64(253))

	crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // what was synced, nothing more
	net := te.net
	te.e.Close() // the original's goroutines; the clone never saw this
	te.net = multiraft.NewMemNetwork()
	net.Close()
	te.cfg = func(c *multiraft.Config) { c.FS, c.SnapshotEntries = crashed, every }
	te.start()
	st := te.e.Stats()
	require.Zero(t, st.Restores, "the state on disk was used, no snapshot restored")
	require.NoError(t, te.e.Campaign(context.Background(), 1))
	r := te.sm(1)
	require.Eventually(t, func() bool {
		return r.count() == want.count && r.offset() == want.cursor && len(r.entriesSorted()) == 2
	},
		10*time.Second, 10*time.Millisecond, "the log after the applied record is replayed")
	require.Equal(t, want, stateOf(t, r))
	replayed := te.e.Stats().Applied
	t.Logf("before the crash %d entries applied; after it %d replayed", applied, replayed)
	require.Less(t, replayed, uint64(2*every), "the replay starts at the state's applied record, not at the start of the backlog")
	out := te.apply(t, 1, appendCommand([]storage.Record{{Body: []byte("after")}}))
	require.Equal(t, uint64(len(all)), decodeFirst(out), "offsets go on")
}

func decodeFirst(out []byte) uint64 {
	var v uint64
	for _, b := range out {
		v = v<<8 | uint64(b)
	}
	return v
}

// TestSnapshotToNewReplica adds a replica to a group whose log was
// compacted under a backlog of 3,000 records (3 MiB, none of it in
// memory): it catches up from a snapshot built from the leader's disk,
// holds the same state, follows the log after it, and keeps it over a
// restart without restoring again.
func TestSnapshotToNewReplica(t *testing.T) {
	net := multiraft.NewMemNetwork()
	defer net.Close()
	trs := []multiraft.Transport{net.Transport(1), net.Transport(2)}
	dirs := []string{t.TempDir(), t.TempDir()}
	states := []map[uint64]*state{{}, {}}
	open := func(i int, tr multiraft.Transport) *multiraft.Engine {
		e, err := multiraft.New(multiraft.Config{ID: uint64(i + 1), Dir: dirs[i], Transport: tr, TickInterval: 10 * time.Millisecond, SnapshotEntries: 8,
			NewStateMachine: func(g uint64) multiraft.StateMachine {
				s := newState(testKey, &feed{})
				states[i][g] = s
				return s
			}})
		require.NoError(t, err)
		return e
	}
	ctx := context.Background()
	e1 := open(0, trs[0])
	defer e1.Close()
	te := &testEngine{t: t, e: e1}
	require.NoError(t, e1.CreateGroup(ctx, 1, []uint64{1}))
	require.NoError(t, e1.Campaign(ctx, 1))
	require.Eventually(t, func() bool { st, err := e1.Status(ctx, 1); return err == nil && st.IsLeader }, 5*time.Second, 5*time.Millisecond)
	backlog(t, te, 1, 3000, 30, 1024)
	te.apply(t, 1, offsetsCommand(opDelOffsets, []uint64{0, 10}))
	te.apply(t, 1, putCommand([]unacked.Entry{entry(1, unacked.Delivered)}))
	require.NotZero(t, e1.Stats().Snapshots, "the leader's log was compacted")
	want := stateOf(t, states[0][1])

	e2 := open(1, trs[1])
	require.NoError(t, e2.CreateGroup(ctx, 1, nil))
	require.NoError(t, e1.AddLearner(ctx, 1, 2))
	require.Eventually(t, func() bool { return states[1][1].count() == want.count }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, want, stateOf(t, states[1][1]))
	require.NotZero(t, e1.Stats().SnapshotsSent)
	require.Equal(t, uint64(1), e2.Stats().Restores)

	te.apply(t, 1, appendCommand([]storage.Record{{Body: []byte("after")}}))
	require.Eventually(t, func() bool { return states[1][1].count() == want.count+1 }, 10*time.Second, 10*time.Millisecond, "the replica follows the log after the snapshot")

	// Cut off while the leader's log moves past a checkpoint and a few
	// entries more: the snapshot it then sends is of its state as
	// applied, later than its checkpoint, and the replica goes on from
	// there without applying anything twice.
	net.Cut(1, 2)
	snaps, sent := e1.Stats().Snapshots, e1.Stats().SnapshotsSent
	for i := range 20 { // not a multiple of the checkpoint interval: the last checkpoint is behind
		te.apply(t, 1, appendCommand([]storage.Record{{Body: []byte(fmt.Sprint("late ", i))}}))
	}
	require.Greater(t, e1.Stats().Snapshots, snaps)
	net.Heal(1, 2)
	want = stateOf(t, states[0][1])
	require.Eventually(t, func() bool { return states[1][1].count() >= want.count }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // anything applied twice would land meanwhile
	require.Equal(t, want, stateOf(t, states[1][1]))
	require.Greater(t, e1.Stats().SnapshotsSent, sent, "it caught up from a snapshot")

	require.NoError(t, e2.Close())
	tr2 := net.Transport(2)
	e2 = open(1, tr2)
	defer e2.Close()
	require.Zero(t, e2.Stats().Restores, "the restored state is on disk")
	require.Equal(t, want, stateOf(t, states[1][1]))
}

// TestRemoveGroupDeletesState checks that removing a queue's group
// deletes its keys: nothing is left in its range of the database.
func TestRemoveGroupDeletesState(t *testing.T) {
	te := newTestEngine(t, nil)
	s := te.group(t, 1)
	backlog(t, te, 1, 100, 10, 100)
	te.apply(t, 1, putCommand([]unacked.Entry{entry(1, unacked.Delivered)}))
	keys := func() int {
		n := 0
		require.NoError(t, s.data.Scan(nil, nil, func(_, _ []byte) bool { n++; return true }))
		return n
	}
	require.Equal(t, 102, keys(), "the counters, 100 records and an entry")
	require.NoError(t, te.e.RemoveGroup(context.Background(), 1))
	require.Eventually(t, func() bool { return keys() == 0 }, 5*time.Second, 5*time.Millisecond)
}

// TestFormat1Converts opens a directory of multiraft's format 1, whose
// checkpoint holds a queue's whole state, and finds the state on disk;
// opened again, nothing is restored.
func TestFormat1Converts(t *testing.T) {
	te := newTestEngine(t, nil)
	s := te.group(t, 1)
	backlog(t, te, 1, 50, 10, 10)
	te.apply(t, 1, putCommand([]unacked.Entry{entry(2, unacked.Returned)}))
	var snap bytes.Buffer
	require.NoError(t, s.Snapshot(&snap))
	want := stateOf(t, s)

	r, changes, _ := restoreInto(t, snap.Bytes())
	require.Equal(t, want, stateOf(t, r))
	require.Contains(t, *changes, meta.Change{Kind: meta.ChangeReset})

	dir := t.TempDir()
	writeFormat1(t, dir, 1, snap.Bytes())
	again := &testEngine{t: t, dir: dir, net: multiraft.NewMemNetwork(), feed: &feed{}}
	defer again.net.Close()
	again.start()
	require.Equal(t, uint64(1), again.e.Stats().Restores)
	require.NoError(t, again.e.Close())
	again.start()
	defer again.e.Close()
	require.Zero(t, again.e.Stats().Restores, "converted once: the directory is of format 2 and the state on disk")
	require.Equal(t, want, stateOf(t, again.sm(1)))
}
