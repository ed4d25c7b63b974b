package pebble

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLiveSet compares liveSet with a map under random adds, ranges,
// removes and (rarely) removeFroms spread over offsets far apart (so first's fallback over every
// chunk runs too), checking count, membership and first after each step.
func TestLiveSet(t *testing.T) {
	tests := []struct {
		name   string
		spread uint64 // offsets fall in [0, spread)
	}{
		{"OneChunk", chunkBits},
		{"FewChunks", 5 * chunkBits},
		{"WideGaps", 500 * chunkBits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, tt.spread))
			var l liveSet
			want := map[uint64]bool{}
			for step := 0; step < 2000; step++ {
				off := rng.Uint64N(tt.spread)
				switch k := rng.IntN(61); {
				case k == 60:
					var wantN uint64
					wantEnd := off
					for o := range want {
						if o >= off {
							wantN++
							wantEnd = max(wantEnd, o+1)
							delete(want, o)
						}
					}
					n, end := l.removeFrom(off)
					require.Equal(t, wantN, n, "removeFrom(%d)", off)
					require.Equal(t, wantEnd, end, "removeFrom(%d)", off)
				case k < 20:
					require.Equal(t, !want[off], l.add(off))
					want[off] = true
				case k < 40:
					n := rng.Uint64N(200) + 1
					// addRange wants offsets not yet live.
					free := true
					for o := off; o < off+n; o++ {
						free = free && !want[o]
					}
					if free {
						l.addRange(off, n)
						for o := off; o < off+n; o++ {
							want[o] = true
						}
					}
				default:
					require.Equal(t, want[off], l.remove(off))
					delete(want, off)
				}
				require.Equal(t, uint64(len(want)), l.count)
				require.Equal(t, want[off], l.contains(off))
				from := rng.Uint64N(tt.spread)
				var lowest []uint64
				for o := range want {
					if o >= from {
						lowest = append(lowest, o)
					}
				}
				got, ok := l.first(from)
				if len(lowest) == 0 {
					require.False(t, ok)
					continue
				}
				require.True(t, ok)
				require.Equal(t, slices.Min(lowest), got)
			}
			for o := range want {
				require.True(t, l.remove(o))
			}
			require.Zero(t, l.count)
			require.Empty(t, l.chunks, "empty chunks are dropped")
		})
	}
}

// TestLiveSetSteady checks a queue's steady state (append a batch, remove
// the oldest ones) allocates nothing once warm: emptied chunks are reused.
func TestLiveSetSteady(t *testing.T) {
	var l liveSet
	next, low := uint64(0), uint64(0)
	step := func() {
		l.addRange(next, 256)
		next += 256
		for ; low < next-512 && next >= 512; low++ {
			l.remove(low)
		}
	}
	for range 100 {
		step()
	}
	require.Zero(t, testing.AllocsPerRun(1000, step))
}

func BenchmarkLiveSet(b *testing.B) {
	b.ReportAllocs()
	var l liveSet
	next := uint64(0)
	for b.Loop() {
		l.addRange(next, 100)
		for o := next; o < next+100; o++ {
			l.remove(o)
		}
		next += 100
	}
}

// liveSetBytesPerOffset builds the live set of a queue holding n
// contiguous messages, appended in batches of 256, and returns the heap it
// holds per message.
func liveSetBytesPerOffset(n uint64) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := new(liveSet)
	for off := uint64(0); off < n; off += 256 {
		l.addRange(off, 256)
		l.takeDirty()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(l)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// TestLiveSetMemoryPerMessage checks what a queued message not yet
// delivered costs in memory: its bit in the live set, plus its share of
// the chunk's bookkeeping, well under a byte.
func TestLiveSetMemoryPerMessage(t *testing.T) {
	per := liveSetBytesPerOffset(1 << 20)
	require.Less(t, per, 0.25, "%.3f bytes of heap per queued message", per)
}

func BenchmarkLiveSetMemory(b *testing.B) {
	var per float64
	for b.Loop() {
		per = liveSetBytesPerOffset(1 << 20)
	}
	b.ReportMetric(per, "B/msg")
}
