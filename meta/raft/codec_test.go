package raft

import (
	"errors"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// TestRecordCodec checks a cluster member reads records in the encoding a
// single node's storage/pebble writes, nil and empty fields alike, and
// reports a damaged one as corrupt.
func TestRecordCodec(t *testing.T) {
	tests := []struct {
		name string
		r    storage.Record
	}{
		{"zero", storage.Record{}},
		{"empty", storage.Record{Properties: []byte{}, Body: []byte{}}},
		{"typical", storage.Record{Exchange: "amq.topic", RoutingKey: "a.b", Properties: []byte{0x90, 0}, Body: []byte("hello"),
			Persistent: true, Priority: 9, EnqueuedAt: 1700000000000000000, ExpiresAt: 1700000001000000000}},
		{"extremes", storage.Record{Exchange: "\x00\xff", Body: make([]byte, 70000), Priority: 255,
			EnqueuedAt: math.MinInt64, ExpiresAt: math.MaxInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := codec.AppendRecord(nil, &tt.r)
			got, err := readRecord(42, enc)
			require.NoError(t, err)
			want := tt.r
			want.Offset = 42
			require.Equal(t, want, got)
			require.Equal(t, want.Body == nil, got.Body == nil, "Body nil-ness")
			require.Equal(t, want.Properties == nil, got.Properties == nil, "Properties nil-ness")
			_, err = readRecord(0, enc[:5])
			require.ErrorIs(t, err, errCorrupt)
			require.ErrorIs(t, err, codec.ErrCorrupt)
		})
	}
}

func TestEntryCodec(t *testing.T) {
	e := unacked.Entry{Key: unacked.Key{VHost: "v", Queue: "q", Offset: math.MaxUint64}, Connection: "c1",
		Channel: math.MaxUint16, DeliveryTag: 7, Broker: "n1", Incarnation: 3, DeliveredAt: -5,
		DeliveryCount: math.MaxUint32, State: unacked.Returned}
	enc := codec.AppendEntry(nil, &e)
	got, err := readEntry(e.Key, enc)
	require.NoError(t, err)
	require.Equal(t, e, got)
	k, err := parseUnackedKey(unackedKey(e.Key))
	require.NoError(t, err)
	require.Equal(t, e.Key, k)
	for i := range enc {
		_, err := readEntry(e.Key, enc[:i])
		require.ErrorIs(t, err, errCorrupt, "truncated at %d", i)
	}
}

func memDB(t testing.TB) *pebble.DB {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietPebble{}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

func entryOf(cmds ...[]byte) []byte {
	data := []byte{entryVersion, byte(len(cmds))}
	for _, c := range cmds {
		data = append(data, c...)
	}
	return data
}

// TestApplyRejectsCorruptCommandWhole applies an entry whose second command
// is cut short: the first applies, the second is reported and writes
// nothing.
func TestApplyRejectsCorruptCommandWhole(t *testing.T) {
	db := memDB(t)
	var good, bad cmd
	good.append("q", []storage.Record{{Body: []byte("a")}})
	bad.set([]byte("x"), []byte("1"))
	bad.cas([]byte("c"), 0, 1)
	badEnc := appendCommand(nil, 2, &bad)
	data := entryOf(appendCommand(nil, 1, &good), badEnc[:len(badEnc)-3])

	b := db.NewIndexedBatch()
	got := map[uint64]result{}
	err := applyEntry(b, data, nil, func(id uint64, r result) { got[id] = r })
	require.ErrorIs(t, err, errCorrupt)
	require.NoError(t, b.Commit(pebble.Sync))
	require.NoError(t, got[1].err)
	require.ErrorIs(t, got[2].err, errCorrupt)
	_, _, err = db.Get([]byte("x"))
	require.ErrorIs(t, err, pebble.ErrNotFound, "nothing of the corrupt command applies")
	n, err := getU64(db, shardCountKey("q"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
}

// TestApplyOps checks the ops that read state: offsets continue per shard,
// a swap compares, deleting counts only live offsets.
func TestApplyOps(t *testing.T) {
	db := memDB(t)
	apply := func(c *cmd) result {
		t.Helper()
		b := db.NewIndexedBatch()
		var r result
		require.NoError(t, applyEntry(b, entryOf(appendCommand(nil, 1, c)), nil, func(_ uint64, got result) { r = got }))
		require.NoError(t, b.Commit(pebble.NoSync))
		return r
	}
	recs := []storage.Record{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}
	steps := []struct {
		name string
		c    func(c *cmd)
		want result
	}{
		{"append", func(c *cmd) { c.append("q", recs) }, result{val: 0}},
		{"append-again", func(c *cmd) { c.append("q", recs) }, result{val: 3}},
		{"append-other", func(c *cmd) { c.append("other", recs[:1]) }, result{val: 0}},
		{"cas-miss", func(c *cmd) { c.cas([]byte("cur"), 5, 6) }, result{}},
		{"cas-hit", func(c *cmd) { c.cas([]byte("cur"), 0, 6) }, result{ok: true}},
		{"delete-twice", func(c *cmd) { c.delOffsets("q", []uint64{1, 1, 99}) }, result{}},
		{"delete-shard", func(c *cmd) { c.delShard("other") }, result{}},
	}
	for _, s := range steps {
		var c cmd
		s.c(&c)
		require.Equal(t, s.want, apply(&c), s.name)
	}
	count, err := getU64(db, shardCountKey("q"))
	require.NoError(t, err)
	require.Equal(t, uint64(5), count)
	next, err := getU64(db, shardNextKey("other"))
	require.NoError(t, err)
	require.Zero(t, next, "a deleted shard's counter starts again")
}

// FuzzApplyEntry feeds arbitrary entries to the state machine: they may be
// rejected, never panic.
func FuzzApplyEntry(f *testing.F) {
	var c cmd
	c.append("q", []storage.Record{{Body: []byte("x"), Persistent: true}})
	c.cas([]byte("k"), 0, 1)
	c.delOffsets("q", []uint64{0, 5})
	c.delRange([]byte("a"), []byte("b"))
	c.delShard("q")
	c.set(unackedKey(unacked.Key{VHost: "/", Queue: "q", Offset: 1}),
		codec.AppendEntry(nil, &unacked.Entry{State: unacked.Returned, DeliveryCount: 1}))
	c.claim(&unacked.Claim{VHost: "/", Queue: "q", Move: true, From: 1, To: 3,
		Taken:   []unacked.Key{{VHost: "/", Queue: "q", Offset: 1}},
		Entries: []unacked.Entry{{Key: unacked.Key{VHost: "/", Queue: "q", Offset: 1}, State: unacked.Delivered}}})
	f.Add(entryOf(appendCommand(nil, 1, &c)))
	f.Add([]byte{entryVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	db := memDB(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := db.NewIndexedBatch()
		defer b.Close()
		err := applyEntry(b, data, newChangeSet(), func(uint64, result) {})
		if err != nil && !errors.Is(err, errCorrupt) {
			t.Fatalf("non-corruption error %v", err)
		}
	})
}
