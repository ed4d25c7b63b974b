package rates

import (
	"fmt"
	"runtime"
	"testing"
	"time"
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
