package rates

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/measure"
)

// BenchmarkHeapPerObject reports the heap a Recorder holds per queue it
// records (two samples of the message values, no history).
func BenchmarkHeapPerObject(b *testing.B) {
	const n = 10_000
	vals := make([]uint64, MessageValues)
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := New(Config{})
		for round := range 2 {
			r.StartRound(t0.Add(time.Duration(round) * 5 * time.Second))
			for i := range n {
				r.Record(QueueKey("/", fmt.Sprint("queue-", i)), false, MessageCounters, vals)
			}
			r.EndRound()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/object")
		runtime.KeepAlive(r)
	}
}

// What a Recorder says it holds (MemoryBytes, which the memory alarm
// counts) is what it holds in the heap, within a fifth, with and without
// full histories; forgotten objects stop counting at the next round.
func TestRecorderMemoryBytes(t *testing.T) {
	const n = 10_000
	vals := make([]uint64, MessageValues)
	base := measure.LiveHeap()
	r := New(Config{Watch: n})
	round := func(i int, keys int) {
		r.StartRound(t0.Add(time.Duration(i) * 5 * time.Second))
		for k := range keys {
			r.Record(QueueKey("/", fmt.Sprint("queue-", k)), false, MessageCounters, vals)
		}
		r.EndRound()
	}
	for i := range 2 {
		round(i, n)
	}
	heap := measure.LiveHeap() - base
	t.Logf("%d objects: counted %d bytes each, live heap %d", n, r.MemoryBytes()/n, heap/n)
	require.InDelta(t, float64(heap), float64(r.MemoryBytes()), float64(heap)/5)
	for k := range n / 10 {
		_ = r.Details(QueueKey("/", fmt.Sprint("queue-", k)), Query{Age: time.Minute, Incr: 5 * time.Second}, t0.Add(5*time.Second))
	}
	round(2, n)
	heap = measure.LiveHeap() - base
	t.Logf("with %d full histories: counted %d bytes, live heap %d", n/10, r.MemoryBytes(), heap)
	require.InDelta(t, float64(heap), float64(r.MemoryBytes()), float64(heap)/5)
	round(3, 0)
	require.Less(t, r.MemoryBytes(), int64(10<<10), "the vanished objects are forgotten")
	runtime.KeepAlive(r)
}
