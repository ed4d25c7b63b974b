package measure

import (
	"runtime"
	"runtime/metrics"
)

// LiveHeap returns the bytes held by live heap objects after two full
// collections (the first may leave finalized objects for the second), as
// runtime/metrics reports them.
func LiveHeap() int64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}
