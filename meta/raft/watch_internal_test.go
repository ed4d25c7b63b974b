package raft

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

func uk(offset uint64) unacked.Key { return unacked.Key{VHost: "/", Queue: "q", Offset: offset} }

// setEntry stages an index Put of one entry, as Index.Put encodes it.
func setEntry(c *cmd, offset uint64, state unacked.State, count uint32) {
	c.set(unackedKey(uk(offset)), codec.AppendEntry(nil, &unacked.Entry{Key: uk(offset), State: state, DeliveryCount: count}))
}

// TestApplyChanges applies entries of one or more commands with a change
// set and checks the changes each entry makes: deduplicated per batch,
// in apply order, and only for writes that change what a broker follows.
func TestApplyChanges(t *testing.T) {
	db := memDB(t)
	cursor := metakey.Cursor("/", "q")
	recs := []storage.Record{{Body: []byte("a")}, {Body: []byte("b")}}
	topo := func(vhost string) meta.Change { return meta.Change{Kind: meta.ChangeTopology, VHost: vhost} }
	cur := func(off uint64) meta.Change {
		return meta.Change{Kind: meta.ChangeCursor, VHost: "/", Queue: "q", Offset: off}
	}
	returned := func(off uint64, count uint32) meta.Change {
		return meta.Change{Kind: meta.ChangeReturned, VHost: "/", Queue: "q", Offset: off, DeliveryCount: count}
	}
	taken := func(off uint64) meta.Change {
		return meta.Change{Kind: meta.ChangeTaken, VHost: "/", Queue: "q", Offset: off}
	}
	steps := []struct {
		name string
		cmds []func(c *cmd) // one command each, all in one entry
		want []meta.Change
	}{
		{"topology once per vhost", []func(c *cmd){
			func(c *cmd) { c.set(metakey.VHost("/"), []byte("{}")) },
			func(c *cmd) { c.set(metakey.Name(metakey.KindExch, "/", "x"), []byte("{}")) },
			func(c *cmd) {
				c.set(metakey.Name(metakey.KindQueue, "/", "q"), []byte("{}"))
				c.del(metakey.Binding("a", "x", "queue", "", "", nil))
			},
			func(c *cmd) {
				c.set(metakey.User("guest"), []byte("{}"))
				c.set(metakey.Perm("guest", "/"), []byte("{}"))
				c.del(metakey.VHost("old"))
			},
		}, []meta.Change{topo(""), topo("/"), topo("a")}},
		{"appends once per shard, last tail at first place", []func(c *cmd){
			func(c *cmd) { c.append("s", recs) },
			func(c *cmd) { c.cas(cursor, 0, 1) },
			func(c *cmd) { c.append("s", recs[:1]) },
			func(c *cmd) { c.append("t", recs[:1]) },
		}, []meta.Change{{Kind: meta.ChangeAppended, Shard: "s", Offset: 3}, cur(1), {Kind: meta.ChangeAppended, Shard: "t", Offset: 1}}},
		{"failed or foreign swaps", []func(c *cmd){
			func(c *cmd) { c.cas(cursor, 0, 5) },
			func(c *cmd) { c.cas([]byte("other"), 0, 5) },
		}, nil},
		{"returned then taken by a put", []func(c *cmd){
			func(c *cmd) { setEntry(c, 0, unacked.Returned, 2) },
			func(c *cmd) {
				setEntry(c, 0, unacked.Delivered, 3)
				setEntry(c, 1, unacked.Delivered, 1)
			},
		}, []meta.Change{returned(0, 2), taken(0)}},
		{"deleting a returned entry takes it", []func(c *cmd){
			func(c *cmd) { setEntry(c, 2, unacked.Returned, 1) },
			func(c *cmd) {
				c.del(unackedKey(uk(2)))
				c.del(unackedKey(uk(1)))
				c.del(unackedKey(uk(9)))
			},
		}, []meta.Change{returned(2, 1), taken(2)}},
		{"claim", []func(c *cmd){
			func(c *cmd) { setEntry(c, 3, unacked.Returned, 1) },
			func(c *cmd) {
				c.claim(&unacked.Claim{VHost: "/", Queue: "q", Move: true, From: 1, To: 5, Taken: []unacked.Key{uk(3)},
					Entries: []unacked.Entry{{Key: uk(3), State: unacked.Delivered, DeliveryCount: 2}, {Key: uk(4), State: unacked.Delivered}}})
			},
			func(c *cmd) { c.claim(&unacked.Claim{VHost: "/", Queue: "q", Move: true, From: 1, To: 6}) },
		}, []meta.Change{returned(3, 1), taken(3), cur(5)}},
		{"deleting a queue tells only topology", []func(c *cmd){
			func(c *cmd) {
				p := unackedQueuePrefix("/", "q")
				c.delRange(p, codec.Successor(p))
			},
			func(c *cmd) {
				c.del(metakey.Name(metakey.KindQueue, "/", "q"))
				c.del(cursor)
			},
		}, []meta.Change{topo("/")}},
	}
	for _, s := range steps {
		var data [][]byte
		for i, f := range s.cmds {
			var c cmd
			f(&c)
			data = append(data, appendCommand(nil, uint64(i), &c))
		}
		b := db.NewIndexedBatch()
		cs := newChangeSet()
		require.NoError(t, applyEntry(b, entryOf(data...), cs, func(_ uint64, r result) { require.NoError(t, r.err) }), s.name)
		require.NoError(t, b.Commit(pebble.NoSync))
		require.Equal(t, s.want, cs.changes(), s.name)
	}
	require.Nil(t, (*changeSet)(nil).changes(), "a nil set records nothing")
}

// TestApplyClaim checks opClaim's conditions against the state it reads:
// a failed claim writes nothing.
func TestApplyClaim(t *testing.T) {
	db := memDB(t)
	cursor := metakey.Cursor("/", "q")
	apply := func(f func(c *cmd)) bool {
		t.Helper()
		var c cmd
		f(&c)
		b := db.NewIndexedBatch()
		var r result
		require.NoError(t, applyEntry(b, entryOf(appendCommand(nil, 1, &c)), nil, func(_ uint64, got result) { r = got }))
		require.NoError(t, r.err)
		require.NoError(t, b.Commit(pebble.NoSync))
		return r.ok
	}
	require.True(t, apply(func(c *cmd) {
		c.cas(cursor, 0, 4)
		setEntry(c, 1, unacked.Returned, 1)
		setEntry(c, 2, unacked.Delivered, 1)
	}))
	claim := func(cl unacked.Claim) func(c *cmd) {
		cl.VHost, cl.Queue = "/", "q"
		return func(c *cmd) { c.claim(&cl) }
	}
	e7 := []unacked.Entry{{Key: uk(7), State: unacked.Delivered}}
	tests := []struct {
		name string
		c    unacked.Claim
		want bool
	}{
		{"cursor elsewhere", unacked.Claim{Move: true, From: 3, To: 8, Entries: e7}, false},
		{"taken missing", unacked.Claim{Move: true, From: 4, To: 8, Taken: []unacked.Key{uk(1), uk(9)}, Entries: e7}, false},
		{"taken delivered", unacked.Claim{Taken: []unacked.Key{uk(2)}, Entries: e7}, false},
		{"taken but cursor elsewhere", unacked.Claim{Move: true, From: 0, To: 8, Taken: []unacked.Key{uk(1)}, Entries: e7}, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, apply(claim(tt.c)), tt.name)
		_, _, err := db.Get(unackedKey(uk(7)))
		require.ErrorIs(t, err, pebble.ErrNotFound, "%s wrote an entry", tt.name)
		off, err := getU64(db, cursor)
		require.NoError(t, err)
		require.Equal(t, uint64(4), off, "%s moved the cursor", tt.name)
	}
	require.True(t, apply(claim(unacked.Claim{Move: true, From: 4, To: 8, Taken: []unacked.Key{uk(1)}, Entries: e7})))
	off, err := getU64(db, cursor)
	require.NoError(t, err)
	require.Equal(t, uint64(8), off)
	ok, err := has(db.NewIndexedBatch(), unackedKey(uk(7)))
	require.NoError(t, err)
	require.True(t, ok)

	// A claim op with unknown flags is corrupt: rejected whole.
	var c cmd
	c.claim(&unacked.Claim{VHost: "/", Queue: "q"})
	enc := appendCommand(nil, 1, &c)
	enc[8+1+1+1+len(cursor)] = 0x80 // id, op count, op, lp(cursor): the flags
	b := db.NewIndexedBatch()
	defer b.Close()
	var r result
	require.ErrorIs(t, applyEntry(b, entryOf(enc), nil, func(_ uint64, got result) { r = got }), errCorrupt)
	require.ErrorIs(t, r.err, errCorrupt)
}

// BenchmarkApplyPut measures applying one entry of a 16-entry index Put,
// with nobody watching and with a watcher's change set (which reads each
// replaced entry).
func BenchmarkApplyPut(b *testing.B) {
	db := memDB(b)
	var c cmd
	for i := range 16 {
		setEntry(&c, uint64(i), unacked.Delivered, 1)
	}
	data := entryOf(appendCommand(nil, 1, &c))
	for _, watched := range []bool{false, true} {
		b.Run(map[bool]string{false: "unwatched", true: "watched"}[watched], func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				batch := db.NewIndexedBatch()
				var cs *changeSet
				if watched {
					cs = newChangeSet()
				}
				if err := applyEntry(batch, data, cs, func(uint64, result) {}); err != nil {
					b.Fatal(err)
				}
				batch.Close()
			}
		})
	}
}

// TestClaimCodecTruncated cuts a claim command short at every length: the
// entry is rejected as corrupt and nothing of the claim is written.
func TestClaimCodecTruncated(t *testing.T) {
	db := memDB(t)
	var c cmd
	c.claim(&unacked.Claim{VHost: "/", Queue: "q", Move: true, From: 0, To: 2, Taken: []unacked.Key{uk(9)},
		Entries: []unacked.Entry{{Key: uk(0), Connection: "c", State: unacked.Delivered}, {Key: uk(1), State: unacked.Delivered}}})
	enc := appendCommand(nil, 1, &c)
	for i := range enc {
		b := db.NewIndexedBatch()
		err := applyEntry(b, entryOf(enc[:i]), newChangeSet(), func(uint64, result) {})
		require.ErrorIs(t, err, errCorrupt, "truncated at %d", i)
		require.Zero(t, b.Count(), "truncated at %d: nothing staged", i)
		require.NoError(t, b.Close())
	}
}
