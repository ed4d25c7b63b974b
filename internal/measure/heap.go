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

// Stacks returns the bytes of goroutine stacks, as runtime/metrics reports
// them, after a collection (which shrinks stacks that use little of
// theirs).
func Stacks() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}
