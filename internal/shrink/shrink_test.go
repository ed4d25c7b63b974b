package shrink

import (
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/measure"
)

// A map that grew to 100,000 entries and was emptied down to 10 gives its
// table back, keeping the 10; one that was never large is never copied.
func TestMapGivesBackTheTable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		peak, keep int
		rebuilt    bool
	}{
		{"large burst", 100_000, 10, true},
		{"emptied", 100_000, 0, true},
		{"a quarter left", 100_000, 25_000, false},
		{"small map", MinPeak - 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := measure.LiveHeap()
			m := map[string]int{}
			for i := range tc.peak {
				m[strconv.Itoa(i)] = i
			}
			full := measure.LiveHeap() - base
			var p Peak
			first := m
			for i := tc.keep; i < tc.peak; i++ {
				delete(m, strconv.Itoa(i))
				m = Map(m, &p)
			}
			require.Len(t, m, tc.keep)
			for i := range tc.keep {
				require.Equal(t, i, m[strconv.Itoa(i)])
			}
			// Rebuilt maps are new maps: the one the burst grew is gone.
			first[""] = -1
			_, kept := m[""]
			require.Equal(t, !tc.rebuilt, kept, "rebuilt")
			if tc.rebuilt {
				left := measure.LiveHeap() - base
				t.Logf("table of %d entries: %d KiB; after the deletes: %d KiB", tc.peak, full>>10, left>>10)
				require.Less(t, left, full/10)
			}
			runtime.KeepAlive(m)
		})
	}
}

// Deleting every entry of a large map one by one copies fewer entries in
// all than the map held: each rebuild copies a quarter of what the
// previous one left at most.
func TestMapCopiesLinearly(t *testing.T) {
	const n = 1 << 16
	m := make(map[int]int)
	for i := range n {
		m[i] = i
	}
	var p Peak
	copied, rebuilds := 0, 0
	for i := range n {
		delete(m, i)
		before := reflect.ValueOf(m).UnsafePointer()
		if m = Map(m, &p); reflect.ValueOf(m).UnsafePointer() != before {
			copied += len(m)
			rebuilds++
		}
	}
	require.Empty(t, m)
	t.Logf("%d rebuilds copied %d entries", rebuilds, copied)
	require.Less(t, copied, n/2)
	require.Positive(t, rebuilds)
}

// A slice emptied from its end gives back its array once under a quarter
// of its capacity; a short one keeps it.
func TestSlice(t *testing.T) {
	s := make([]int, 4*MinPeak)
	for i := range s {
		s[i] = i
	}
	s = Slice(s[:MinPeak])
	require.Equal(t, 4*MinPeak, cap(s), "a quarter left: kept")
	s = Slice(s[:MinPeak-1])
	require.Equal(t, MinPeak-1, cap(s))
	require.Equal(t, MinPeak-2, s[MinPeak-2])
	short := make([]int, 1, MinPeak-1)
	require.Equal(t, MinPeak-1, cap(Slice(short)))
}

func BenchmarkMapDelete(b *testing.B) {
	m := make(map[int]int)
	var p Peak
	b.ReportAllocs()
	for i := range b.N {
		m[i] = i
		if i >= 4*MinPeak {
			delete(m, i-4*MinPeak)
			m = Map(m, &p)
		}
	}
}
