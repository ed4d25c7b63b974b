package unacked_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/unacked"
)

// tags lists the table's tags via All.
func tags[V any](t *unacked.Table[V]) []uint64 {
	var out []uint64
	for tag := range t.All() {
		out = append(out, tag)
	}
	return out
}

func TestTableAdd(t *testing.T) {
	tests := []struct {
		name    string
		tags    []uint64
		wantErr bool
	}{
		{"from-one", []uint64{1, 2, 3}, false},
		{"gaps", []uint64{1, 5, 100, 1 << 40}, false},
		{"zero", []uint64{0}, true},
		{"repeat", []uint64{1, 2, 2}, true},
		{"backwards", []uint64{5, 4}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tbl unacked.Table[string]
			var err error
			var added []uint64
			for _, tag := range tt.tags {
				if err = tbl.Add(tag, "v"); err != nil {
					break
				}
				added = append(added, tag)
			}
			if tt.wantErr {
				require.ErrorContains(t, err, "unacked: ")
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, added, tags(&tbl), "a rejected Add changes nothing")
			require.Equal(t, len(added), tbl.Len())
		})
	}
}

func TestTableTake(t *testing.T) {
	var tbl unacked.Table[unacked.Ref]
	for tag := uint64(1); tag <= 5; tag++ {
		require.NoError(t, tbl.Add(tag, unacked.Ref{Key: unacked.Key{Queue: "q", Offset: tag * 10}, ConsumerTag: "c"}))
	}
	// Tags taken twice, never added, and out of range are all "unknown
	// delivery tag" to the channel.
	steps := []struct {
		tag    uint64
		ok     bool
		offset uint64
	}{
		{3, true, 30}, {3, false, 0}, {0, false, 0}, {6, false, 0}, {1, true, 10}, {1, false, 0}, {5, true, 50},
	}
	for _, st := range steps {
		ref, ok := tbl.Take(st.tag)
		require.Equal(t, st.ok, ok, "tag %d", st.tag)
		require.Equal(t, st.offset, ref.Offset, "tag %d", st.tag)
	}
	require.Equal(t, []uint64{2, 4}, tags(&tbl))
	require.Equal(t, 2, tbl.Len())
	ref, ok := tbl.Get(4)
	require.True(t, ok)
	require.Equal(t, uint64(40), ref.Offset)
	_, ok = tbl.Get(3)
	require.False(t, ok)
	require.NoError(t, tbl.Add(6, unacked.Ref{}), "tags keep counting after takes")
	require.Error(t, tbl.Add(5, unacked.Ref{}), "even past a tag that was taken")
}

func TestTableTakeUpTo(t *testing.T) {
	tests := []struct {
		name     string
		add      []uint64
		take     []uint64 // single takes first
		upTo     uint64
		want     []uint64 // taken by TakeUpTo, in order
		wantLeft []uint64
	}{
		{"prefix", []uint64{1, 2, 3, 4, 5}, nil, 3, []uint64{1, 2, 3}, []uint64{4, 5}},
		{"holes", []uint64{1, 2, 3, 4, 5}, []uint64{2, 3}, 4, []uint64{1, 4}, []uint64{5}},
		{"gaps", []uint64{2, 7, 9, 30}, nil, 8, []uint64{2, 7}, []uint64{9, 30}},
		{"below-all", []uint64{5, 6}, nil, 4, nil, []uint64{5, 6}},
		{"zero", []uint64{1}, nil, 0, nil, []uint64{1}},
		{"past-all", []uint64{1, 2}, nil, 100, []uint64{1, 2}, nil},
		{"taken-tag", []uint64{1, 2, 3}, []uint64{2}, 2, []uint64{1}, []uint64{3}},
		{"empty", nil, nil, 10, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tbl unacked.Table[uint64]
			for _, tag := range tt.add {
				require.NoError(t, tbl.Add(tag, tag*10))
			}
			for _, tag := range tt.take {
				_, ok := tbl.Take(tag)
				require.True(t, ok)
			}
			var got []uint64
			n := tbl.TakeUpTo(tt.upTo, func(tag, v uint64) {
				require.Equal(t, tag*10, v)
				got = append(got, tag)
			})
			require.Equal(t, tt.want, got)
			require.Equal(t, len(tt.want), n)
			require.Equal(t, tt.wantLeft, tags(&tbl))
			require.Equal(t, len(tt.wantLeft), tbl.Len())
		})
	}
}

func TestTableTakeAll(t *testing.T) {
	var tbl unacked.Table[string]
	for _, tag := range []uint64{3, 4, 8} {
		require.NoError(t, tbl.Add(tag, "x"))
	}
	tbl.Take(4)
	var got []uint64
	require.Equal(t, 2, tbl.TakeAll(func(tag uint64, _ string) { got = append(got, tag) }))
	require.Equal(t, []uint64{3, 8}, got)
	require.Zero(t, tbl.Len())
	require.Zero(t, tbl.TakeAll(nil))
	require.Error(t, tbl.Add(8, "x"), "an emptied table still remembers the last tag")
	require.NoError(t, tbl.Add(9, "x"))
}

func TestTableAllStops(t *testing.T) {
	var tbl unacked.Table[int]
	for tag := uint64(1); tag <= 5; tag++ {
		require.NoError(t, tbl.Add(tag, int(tag)))
	}
	var seen []int
	for _, v := range tbl.All() {
		seen = append(seen, v)
		if v == 2 {
			break
		}
	}
	require.Equal(t, []int{1, 2}, seen)
}

// TestTableModel drives a Table and a map side by side with random adds,
// takes (in order, at random, of unknown tags) and multiple-takes, with
// random gaps between tags, checking they always agree. It exercises head
// advance and compaction far more than the hand-written cases.
func TestTableModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var tbl unacked.Table[uint64]
	model := map[uint64]uint64{}
	var next uint64
	check := func() {
		t.Helper()
		want := make([]uint64, 0, len(model))
		for tag := range model {
			want = append(want, tag)
		}
		slices.Sort(want)
		got := tags(&tbl)
		if len(want) == 0 {
			want = nil
		}
		require.Equal(t, want, got)
		require.Equal(t, len(model), tbl.Len())
	}
	for step := range 20000 {
		switch r := rng.IntN(100); {
		case r < 50: // deliver, sometimes skipping tags (no-ack deliveries)
			next += 1 + uint64(rng.IntN(3)/2)*uint64(rng.IntN(50))
			require.NoError(t, tbl.Add(next, next*3))
			model[next] = next * 3
		case r < 85: // ack one, usually a live tag, sometimes a stale one
			if next == 0 {
				continue
			}
			tag := 1 + rng.Uint64N(next)
			v, ok := tbl.Take(tag)
			want, wantOK := model[tag]
			require.Equal(t, wantOK, ok, "step %d tag %d", step, tag)
			require.Equal(t, want, v)
			delete(model, tag)
		case r < 95: // ack multiple
			if next == 0 {
				continue
			}
			upTo := 1 + rng.Uint64N(next)
			var taken []uint64
			tbl.TakeUpTo(upTo, func(tag, v uint64) {
				require.Equal(t, model[tag], v)
				taken = append(taken, tag)
			})
			var want []uint64
			for tag := range model {
				if tag <= upTo {
					want = append(want, tag)
					delete(model, tag)
				}
			}
			slices.Sort(want)
			require.Equal(t, want, taken, "step %d upTo %d", step, upTo)
		default: // peek
			if next == 0 {
				continue
			}
			tag := 1 + rng.Uint64N(next)
			v, ok := tbl.Get(tag)
			want, wantOK := model[tag]
			require.Equal(t, wantOK, ok)
			require.Equal(t, want, v)
		}
		if step%97 == 0 {
			check()
		}
	}
	check()
}

func BenchmarkTable(b *testing.B) {
	b.Run("add+take/in-order", func(b *testing.B) {
		var tbl unacked.Table[unacked.Ref]
		ref := unacked.Ref{Key: unacked.Key{VHost: "/", Queue: "q"}, ConsumerTag: "ctag"}
		var tag uint64
		b.ReportAllocs()
		for b.Loop() {
			tag++
			if err := tbl.Add(tag, ref); err != nil {
				b.Fatal(err)
			}
			// Keep a window of 128 unacked, as a consumer with prefetch 128.
			if tag > 128 {
				if _, ok := tbl.Take(tag - 128); !ok {
					b.Fatal("take")
				}
			}
		}
	})
	b.Run("add+take/random", func(b *testing.B) {
		// 128 outstanding, acked in random order: each new delivery
		// replaces a random outstanding one.
		var tbl unacked.Table[unacked.Ref]
		ref := unacked.Ref{Key: unacked.Key{VHost: "/", Queue: "q"}, ConsumerTag: "ctag"}
		rng := rand.New(rand.NewPCG(1, 1))
		var out [128]uint64
		var tag uint64
		for i := range out {
			tag++
			out[i] = tag
			if err := tbl.Add(tag, ref); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			tag++
			if err := tbl.Add(tag, ref); err != nil {
				b.Fatal(err)
			}
			i := rng.IntN(len(out))
			if _, ok := tbl.Take(out[i]); !ok {
				b.Fatal("take")
			}
			out[i] = tag
		}
	})
	b.Run("add+take-multiple/64", func(b *testing.B) {
		var tbl unacked.Table[unacked.Ref]
		ref := unacked.Ref{Key: unacked.Key{VHost: "/", Queue: "q"}, ConsumerTag: "ctag"}
		var tag uint64
		b.ReportAllocs()
		for b.Loop() {
			for range 64 {
				tag++
				if err := tbl.Add(tag, ref); err != nil {
					b.Fatal(err)
				}
			}
			if tbl.TakeUpTo(tag, func(uint64, unacked.Ref) {}) != 64 {
				b.Fatal("multiple ack")
			}
		}
	})
}
