package delayed

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/measure"
	"github.com/warrenmq/broker/internal/memuse"
	pebblestore "github.com/warrenmq/broker/storage/pebble"
)

// stores lists the Store implementations; open reopens the same data
// (a restart) where the store has any.
func stores(t *testing.T) map[string]func() Store {
	dir := t.TempDir()
	var closeDB func()
	t.Cleanup(func() {
		if closeDB != nil {
			closeDB()
		}
	})
	mem := NewMemory(nil)
	return map[string]func() Store{
		"memory": func() Store { return mem },
		"pebble": func() Store {
			if closeDB != nil {
				closeDB()
			}
			db, err := pebblestore.Open(dir)
			require.NoError(t, err)
			closeDB = func() { require.NoError(t, db.Close()) }
			s, err := OpenPebble(db)
			require.NoError(t, err)
			return s
		},
	}
}

func msg(vh, x string, due int64, seq uint64) Message {
	return Message{Key: Key{Due: due, Seq: seq}, VHost: vh, Exchange: x, RoutingKey: "rk",
		CC: []string{"a", "b"}, Properties: []byte{0, 0}, Body: []byte(fmt.Sprintf("m%d", seq)), Persistent: true, Delay: 5}
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			_, ok, err := s.Next(ctx, nil)
			require.NoError(t, err)
			require.False(t, ok)
			// Out of order, negative times, two exchanges.
			require.NoError(t, s.Put(ctx, []Message{msg("/", "x", 30, 3), msg("/", "y", -5, 1)}, true))
			require.NoError(t, s.Put(ctx, []Message{msg("/", "x", 10, 4), msg("v", "x", 10, 2)}, false))
			require.EqualValues(t, 4, s.Len())
			require.EqualValues(t, 2, s.Count("/", "x"))
			require.EqualValues(t, 1, s.Count("v", "x"))
			require.EqualValues(t, 4, s.LastSeq())
			k, ok, err := s.Next(ctx, nil)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, Key{-5, 1}, k)
			k, ok, err = s.Next(ctx, func(k Key) bool { return k.Due < 10 || k.Seq == 2 })
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, Key{10, 4}, k, "skipped keys are passed over")
			k, _, _ = s.Next(ctx, nil)
			require.Equal(t, Key{-5, 1}, k, "and stay")

			due, err := s.Due(ctx, 10, 10)
			require.NoError(t, err)
			require.Len(t, due, 3)
			require.Equal(t, []Key{{-5, 1}, {10, 2}, {10, 4}}, []Key{due[0].Key, due[1].Key, due[2].Key})
			require.Equal(t, msg("/", "y", -5, 1), due[0])
			due, err = s.Due(ctx, 10, 2)
			require.NoError(t, err)
			require.Len(t, due, 2, "Due leaves messages in place and honours max")

			peek, err := s.Peek(ctx, "/", "x", 10)
			require.NoError(t, err)
			require.Equal(t, []Key{{10, 4}, {30, 3}}, []Key{peek[0].Key, peek[1].Key})

			require.NoError(t, s.Delete(ctx, due))
			require.NoError(t, s.Delete(ctx, due), "deleting twice is harmless")
			require.EqualValues(t, 2, s.Len())
			k, _, _ = s.Next(ctx, nil)
			require.Equal(t, Key{10, 4}, k)
			// A message earlier than the scan start is still found.
			require.NoError(t, s.Put(ctx, []Message{msg("/", "x", 1, 9)}, true))
			k, _, _ = s.Next(ctx, nil)
			require.Equal(t, Key{1, 9}, k)

			s = open() // restart (the memory store is the same object)
			require.EqualValues(t, 3, s.Len())
			require.EqualValues(t, 3, s.Count("/", "x"))
			require.EqualValues(t, 9, s.LastSeq())
			n, err := s.DeleteExchange(ctx, "/", "x")
			require.NoError(t, err)
			require.Equal(t, 3, n)
			require.EqualValues(t, 0, s.Len())
			_, ok, _ = s.Next(ctx, nil)
			require.False(t, ok)
		})
	}
}

func TestCodec(t *testing.T) {
	m := msg("vh", "ex", -3, 7)
	m.CC = nil
	got, err := Decode(m.Encode(nil))
	require.NoError(t, err)
	require.Equal(t, m, got)
	m2 := msg("vh", "ex", 3, 7)
	enc := m2.Encode(nil)
	for i := range len(enc) - 1 {
		_, err := Decode(enc[:i])
		require.ErrorIs(t, err, ErrCorrupt, "cut at %d", i)
	}
	_, err = Decode(append(enc, 0))
	require.ErrorIs(t, err, ErrCorrupt)
}

func FuzzDecode(f *testing.F) {
	m := msg("vh", "ex", 3, 7)
	f.Add(m.Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(m.Encode(nil))
		require.NoError(t, err)
		require.Equal(t, m, again)
	})
}

// What the memory store counts for its messages (Message.HeapBytes) is
// what they hold in the heap, within a fifth, small and large, and it is
// given back as they are deleted.
func TestMessageHeapBytes(t *testing.T) {
	for _, size := range []int{10, 4096} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			const n = 10_000
			var held memuse.Counter
			base := measure.LiveHeap()
			s := NewMemory(&held)
			msgs := make([]Message, n)
			for i := range msgs {
				msgs[i] = Message{Key: Key{Due: int64(i), Seq: uint64(i)}, VHost: "/", Exchange: "delayed",
					RoutingKey: fmt.Sprint("key-", i), Properties: make([]byte, 20), Body: make([]byte, size), Delay: 1000}
			}
			require.NoError(t, s.Put(t.Context(), msgs, false))
			msgs = nil
			heap := measure.LiveHeap() - base
			t.Logf("%d messages of %d bytes: counted %d bytes each, live heap %d", n, size, held.MemoryBytes()/n, heap/n)
			require.InDelta(t, float64(heap), float64(held.MemoryBytes()), float64(heap)/5)
			due, err := s.Due(t.Context(), n, n)
			require.NoError(t, err)
			require.NoError(t, s.Delete(t.Context(), due))
			require.Zero(t, held.MemoryBytes())
			runtime.KeepAlive(s)
		})
	}
}
