package qgroup

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/internal/multiraft"
)

var testKey = meta.QueueKey{VHost: "/", Name: "q"}

// testEngine is a one-member multiraft engine whose groups' state
// machines are queue states of testKey.
type testEngine struct {
	t   testing.TB
	dir string
	net *multiraft.MemNetwork
	e   *multiraft.Engine
	mu  sync.Mutex
	sms map[uint64]*state
	cfg func(*multiraft.Config)
	// feed is every group's feed: their states are all of testKey, so
	// tests watch one group's through it.
	feed *feed
}

func newTestEngine(t testing.TB, cfg func(*multiraft.Config)) *testEngine {
	te := &testEngine{t: t, dir: t.TempDir(), net: multiraft.NewMemNetwork(), cfg: cfg, feed: &feed{}}
	te.start()
	t.Cleanup(func() {
		if te.e != nil {
			te.e.Close()
		}
		te.net.Close()
	})
	return te
}

func (te *testEngine) start() {
	te.sms = map[uint64]*state{}
	c := multiraft.Config{ID: 1, Dir: te.dir, Transport: te.net.Transport(1), TickInterval: 10 * time.Millisecond,
		NewStateMachine: func(g uint64) multiraft.StateMachine {
			s := newState(testKey, te.feed)
			te.mu.Lock()
			te.sms[g] = s
			te.mu.Unlock()
			return s
		}}
	if te.cfg != nil {
		te.cfg(&c)
	}
	e, err := multiraft.New(c)
	require.NoError(te.t, err)
	te.e = e
}

func (te *testEngine) sm(g uint64) *state {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.sms[g]
}

// group creates group g with this member its one voter and waits until
// it leads it.
func (te *testEngine) group(t testing.TB, g uint64) *state {
	ctx := context.Background()
	require.NoError(t, te.e.CreateGroup(ctx, g, []uint64{1}))
	require.NoError(t, te.e.Campaign(ctx, g))
	require.Eventually(t, func() bool {
		st, err := te.e.Status(ctx, g)
		return err == nil && st.IsLeader
	}, 5*time.Second, 5*time.Millisecond)
	return te.sm(g)
}

func (te *testEngine) apply(t testing.TB, g uint64, cmd []byte) []byte {
	out, err := te.e.Propose(context.Background(), g, cmd)
	require.NoError(t, err)
	return out
}

// newTestState is a queue state in group 1 of a fresh one-member engine,
// the changes its feed hears, and how to apply a command to it.
func newTestState(t testing.TB) (*state, *[]meta.Change, func([]byte) []byte) {
	te := newTestEngine(t, nil)
	s := te.group(t, 1)
	var mu sync.Mutex
	var got []meta.Change
	te.feed.watch(func(c meta.Change) { mu.Lock(); got = append(got, c); mu.Unlock() })
	return s, &got, func(cmd []byte) []byte { return te.apply(t, 1, cmd) }
}

func mustRead(t testing.TB, s *state, from uint64, max int) []storage.Record {
	recs, err := s.read(from, max)
	require.NoError(t, err)
	return recs
}

func entry(off uint64, st unacked.State) unacked.Entry {
	return unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q", Offset: off}, Connection: "c", Channel: 1, DeliveryTag: off + 1, Broker: "warren@1", DeliveryCount: 1, State: st}
}

// TestStateCommands applies each command to a queue's state and checks
// what it answers, what it leaves and what the feed hears.
func TestStateCommands(t *testing.T) {
	s, changes, apply := newTestState(t)
	recs := []storage.Record{{Body: []byte("a"), Persistent: true}, {Body: []byte("b")}, {Body: []byte("c")}}

	out := apply(appendCommand(recs))
	require.Equal(t, uint64(0), binary.BigEndian.Uint64(out))
	require.Equal(t, []meta.Change{{Kind: meta.ChangeAppended, Shard: "/\x00q", Offset: 3}}, *changes)
	require.Equal(t, uint64(3), s.count())
	got := mustRead(t, s, 1, 10)
	require.Len(t, got, 2)
	require.Equal(t, uint64(1), got[0].Offset)
	require.Equal(t, "b", string(got[0].Body))

	require.Equal(t, boolResult[1], apply(offsetsCommand(opDelOffsets, []uint64{0, 7})))
	require.Equal(t, uint64(1), s.firstOffset())

	*changes = nil
	require.Equal(t, boolResult[0], apply(casCommand(5, 6)), "the cursor is at 0")
	require.Equal(t, boolResult[1], apply(casCommand(0, 1)))
	require.Equal(t, uint64(1), s.offset())
	require.Equal(t, []meta.Change{{Kind: meta.ChangeCursor, VHost: "/", Queue: "q", Offset: 1}}, *changes)

	*changes = nil
	require.Equal(t, boolResult[1], apply(putCommand([]unacked.Entry{entry(0, unacked.Returned)})))
	require.Equal(t, meta.ChangeReturned, (*changes)[0].Kind)

	tests := []struct {
		name  string
		claim unacked.Claim
		ok    bool
	}{
		{"the cursor moved elsewhere", unacked.Claim{Move: true, From: 0, To: 2, Entries: []unacked.Entry{entry(1, unacked.Delivered)}}, false},
		{"a taken entry that is not returned", unacked.Claim{Taken: []unacked.Key{{VHost: "/", Queue: "q", Offset: 9}}}, false},
		{"the cursor and a returned entry", unacked.Claim{Move: true, From: 1, To: 2, Taken: []unacked.Key{{VHost: "/", Queue: "q", Offset: 0}},
			Entries: []unacked.Entry{entry(0, unacked.Delivered), entry(1, unacked.Delivered)}}, true},
		{"the same again", unacked.Claim{Move: true, From: 1, To: 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := apply(claimCommand(&tt.claim))
			require.Equal(t, tt.ok, out[0] == 1)
		})
	}
	require.Equal(t, uint64(2), s.offset())
	e, ok := s.entry(0)
	require.True(t, ok)
	require.Equal(t, unacked.Delivered, e.State)

	*changes = nil
	require.Equal(t, boolResult[1], apply(putCommand([]unacked.Entry{entry(1, unacked.Returned)})))
	require.Equal(t, boolResult[1], apply(offsetsCommand(opDelete, []uint64{1})))
	require.Equal(t, []meta.ChangeKind{meta.ChangeReturned, meta.ChangeTaken}, []meta.ChangeKind{(*changes)[0].Kind, (*changes)[1].Kind})

	require.Nil(t, apply([]byte{opAppend, 0xff}), "a malformed command changes nothing")
	require.Nil(t, apply([]byte{99}), "an unknown command changes nothing")
	require.Equal(t, uint64(2), s.count())

	// A snapshot restores the same state into a fresh one, and its
	// watchers hear a reset.
	var snap bytes.Buffer
	require.NoError(t, s.Snapshot(&snap))
	r, rchanges, rapply := restoreInto(t, snap.Bytes())
	require.Equal(t, []meta.Change{{Kind: meta.ChangeReset}}, *rchanges)
	require.Equal(t, mustRead(t, s, 0, 10), mustRead(t, r, 0, 10))
	require.Equal(t, s.offset(), r.offset())
	require.Equal(t, s.entriesSorted(), r.entriesSorted())
	require.Equal(t, s.count(), r.count())
	require.Equal(t, s.firstOffset(), r.firstOffset())
	out = rapply(appendCommand(recs[:1]))
	require.Equal(t, uint64(3), binary.BigEndian.Uint64(out), "offsets go on after a restore")

	require.Equal(t, boolResult[1], apply([]byte{opDelQueue}))
	require.Empty(t, s.entriesSorted())
	require.Equal(t, boolResult[1], apply([]byte{opDelShard}))
	require.Zero(t, s.count())
}

// FuzzApply applies arbitrary bytes as a command (a log written by a
// faulty or forged member) to a queue's state on a real engine: the
// state machine refuses or applies, never panics, its counters agree with
// its records on disk, and its snapshot decodes to what it reads.
func FuzzApply(f *testing.F) {
	f.Add(appendCommand([]storage.Record{{Body: []byte("x")}}))
	f.Add(casCommand(0, 1))
	f.Add(putCommand([]unacked.Entry{entry(0, unacked.Returned)}))
	f.Add(claimCommand(&unacked.Claim{Move: true, From: 0, To: 1, Entries: []unacked.Entry{entry(0, unacked.Delivered)}}))
	f.Add(offsetsCommand(opDelete, []uint64{1, 2}))
	f.Add(offsetsCommand(opDelOffsets, []uint64{0, 1}))
	f.Add([]byte{opDelShard})
	te := newTestEngine(f, nil)
	var g uint64
	f.Fuzz(func(t *testing.T, cmd []byte) {
		g++
		s := te.group(t, g)
		te.apply(t, g, appendCommand([]storage.Record{{Body: []byte("a")}, {Body: []byte("b")}}))
		_, err := te.e.Propose(context.Background(), g, cmd)
		require.NoError(t, err, "a command that does not decode still commits, and changes nothing")
		recs := mustRead(t, s, 0, 1<<20)
		require.Equal(t, uint64(len(recs)), s.count())
		if len(recs) > 0 {
			require.Equal(t, recs[0].Offset, s.firstOffset())
		}
		var snap bytes.Buffer
		require.NoError(t, s.Snapshot(&snap))
		var got []storage.Record
		var cursor uint64
		var entries []unacked.Entry
		_, cursor, entries, err = decodeSnapshot(snap.Bytes(), s.entryKey(), func(o uint64, v []byte) error {
			r, err := codec.DecodeRecord(v)
			r.Offset = o
			got = append(got, r)
			return err
		})
		require.NoError(t, err)
		if len(recs) == 0 {
			recs = nil
		}
		require.Equal(t, recs, got)
		require.Equal(t, s.offset(), cursor)
		if len(entries) == 0 {
			entries = nil
		}
		want := s.entriesSorted()
		if len(want) == 0 {
			want = nil
		}
		require.Equal(t, want, entries)
		require.NoError(t, te.e.RemoveGroup(context.Background(), g))
	})
}

// restoreInto writes a directory of multiraft's format 1 (the format
// before queue states were kept on disk: one group whose last checkpoint
// holds the whole state, snap), opens an engine on it and returns the
// group's state as the engine converted it, the changes its feed heard
// from the start, and how to apply a command to it.
func restoreInto(t testing.TB, snap []byte) (*state, *[]meta.Change, func([]byte) []byte) {
	dir := t.TempDir()
	writeFormat1(t, dir, 1, snap)
	var mu sync.Mutex
	var got []meta.Change
	f := &feed{}
	f.watch(func(c meta.Change) { mu.Lock(); got = append(got, c); mu.Unlock() })
	te := &testEngine{t: t, dir: dir, net: multiraft.NewMemNetwork(), feed: f}
	te.start()
	t.Cleanup(func() { te.e.Close(); te.net.Close() })
	require.Equal(t, uint64(1), te.e.Stats().Restores, "the checkpoint was converted")
	require.NoError(t, te.e.Campaign(context.Background(), 1))
	require.Eventually(t, func() bool {
		st, err := te.e.Status(context.Background(), 1)
		return err == nil && st.IsLeader
	}, 5*time.Second, 5*time.Millisecond)
	return te.sm(1), &got, func(cmd []byte) []byte { return te.apply(t, 1, cmd) }
}

// writeFormat1 writes group g, member 1 its one voter, at index 5 with
// snap for its checkpoint, as multiraft's format 1 laid it out.
func writeFormat1(t testing.TB, dir string, g uint64, snap []byte) {
	db, err := pebble.Open(dir, &pebble.Options{})
	require.NoError(t, err)
	key := func(p byte) []byte { return binary.BigEndian.AppendUint64([]byte{p}, g) }
	hs, err := proto.Marshal(&raftpb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(5), Vote: proto.Uint64(1)})
	require.NoError(t, err)
	sn, err := proto.Marshal(&raftpb.Snapshot{Data: snap, Metadata: &raftpb.SnapshotMetadata{
		Index: proto.Uint64(5), Term: proto.Uint64(1), ConfState: &raftpb.ConfState{Voters: []uint64{1}}}})
	require.NoError(t, err)
	for k, v := range map[string][]byte{"F": []byte("warren-multiraft 1"), string(key('g')): nil, string(key('h')): hs, string(key('s')): sn} {
		require.NoError(t, db.Set([]byte(k), v, pebble.Sync))
	}
	require.NoError(t, db.Close())
}
