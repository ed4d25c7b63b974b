package qgroup

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

var testKey = meta.QueueKey{VHost: "/", Name: "q"}

func newTestState() (*state, *[]meta.Change) {
	f := &feed{}
	var got []meta.Change
	f.watch(func(c meta.Change) { got = append(got, c) })
	return newState(testKey, f), &got
}

func entry(off uint64, st unacked.State) unacked.Entry {
	return unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q", Offset: off}, Connection: "c", Channel: 1, DeliveryTag: off + 1, Broker: "warren@1", DeliveryCount: 1, State: st}
}

// TestStateCommands applies each command to a queue's state and checks
// what it answers, what it leaves and what the feed hears.
func TestStateCommands(t *testing.T) {
	s, changes := newTestState()
	recs := []storage.Record{{Body: []byte("a"), Persistent: true}, {Body: []byte("b")}, {Body: []byte("c")}}

	out := s.Apply(2, appendCommand(recs))
	require.Equal(t, uint64(0), binary.BigEndian.Uint64(out))
	require.Equal(t, []meta.Change{{Kind: meta.ChangeAppended, Shard: "/\x00q", Offset: 3}}, *changes)
	require.Equal(t, uint64(3), s.count())
	got := s.read(1, 10)
	require.Len(t, got, 2)
	require.Equal(t, uint64(1), got[0].Offset)
	require.Equal(t, "b", string(got[0].Body))

	require.Equal(t, boolResult[1], s.Apply(3, offsetsCommand(opDelOffsets, []uint64{0, 7})))
	require.Equal(t, uint64(1), s.firstOffset())
	require.Equal(t, int64(2), s.memoryBytes())

	*changes = nil
	require.Equal(t, boolResult[0], s.Apply(4, casCommand(5, 6)), "the cursor is at 0")
	require.Equal(t, boolResult[1], s.Apply(5, casCommand(0, 1)))
	require.Equal(t, uint64(1), s.offset())
	require.Equal(t, []meta.Change{{Kind: meta.ChangeCursor, VHost: "/", Queue: "q", Offset: 1}}, *changes)

	*changes = nil
	require.Equal(t, boolResult[1], s.Apply(6, putCommand([]unacked.Entry{entry(0, unacked.Returned)})))
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
			out := s.Apply(7, claimCommand(&tt.claim))
			require.Equal(t, tt.ok, out[0] == 1)
		})
	}
	require.Equal(t, uint64(2), s.offset())
	e, ok := s.entry(0)
	require.True(t, ok)
	require.Equal(t, unacked.Delivered, e.State)

	*changes = nil
	require.Equal(t, boolResult[1], s.Apply(8, putCommand([]unacked.Entry{entry(1, unacked.Returned)})))
	require.Equal(t, boolResult[1], s.Apply(9, offsetsCommand(opDelete, []uint64{1})))
	require.Equal(t, []meta.ChangeKind{meta.ChangeReturned, meta.ChangeTaken}, []meta.ChangeKind{(*changes)[0].Kind, (*changes)[1].Kind})

	require.Nil(t, s.Apply(10, []byte{opAppend, 0xff}), "a malformed command changes nothing")
	require.Nil(t, s.Apply(10, []byte{99}), "an unknown command changes nothing")
	require.Equal(t, uint64(2), s.count())

	// A checkpoint restores the same state into a fresh one, and its
	// watchers hear a reset.
	snap, err := s.Snapshot()
	require.NoError(t, err)
	r, rchanges := newTestState()
	require.NoError(t, r.Restore(snap))
	require.Equal(t, []meta.Change{{Kind: meta.ChangeReset}}, *rchanges)
	require.Equal(t, s.read(0, 10), r.read(0, 10))
	require.Equal(t, s.offset(), r.offset())
	require.Equal(t, s.entriesSorted(), r.entriesSorted())
	require.Equal(t, s.memoryBytes(), r.memoryBytes())
	out = r.Apply(11, appendCommand(recs[:1]))
	require.Equal(t, uint64(3), binary.BigEndian.Uint64(out), "offsets go on after a restore")
	require.Error(t, r.Restore([]byte{9}), "an unknown checkpoint version")

	require.Equal(t, boolResult[1], s.Apply(12, []byte{opDelQueue}))
	require.Empty(t, s.entriesSorted())
	require.Equal(t, boolResult[1], s.Apply(13, []byte{opDelShard}))
	require.Zero(t, s.count())
}

// FuzzApply applies arbitrary bytes as a command (a log written by a
// faulty or forged member): the state machine refuses or applies, never
// panics, and its checkpoint restores the same state.
func FuzzApply(f *testing.F) {
	f.Add(appendCommand([]storage.Record{{Body: []byte("x")}}))
	f.Add(casCommand(0, 1))
	f.Add(putCommand([]unacked.Entry{entry(0, unacked.Returned)}))
	f.Add(claimCommand(&unacked.Claim{Move: true, From: 0, To: 1, Entries: []unacked.Entry{entry(0, unacked.Delivered)}}))
	f.Add(offsetsCommand(opDelete, []uint64{1, 2}))
	f.Fuzz(func(t *testing.T, cmd []byte) {
		s, _ := newTestState()
		s.Apply(1, appendCommand([]storage.Record{{Body: []byte("a")}, {Body: []byte("b")}}))
		s.Apply(2, cmd)
		snap, err := s.Snapshot()
		require.NoError(t, err)
		r, _ := newTestState()
		require.NoError(t, r.Restore(snap))
		require.Equal(t, s.read(0, 1<<20), r.read(0, 1<<20))
		require.Equal(t, s.entriesSorted(), r.entriesSorted())
	})
}
