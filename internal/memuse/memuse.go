package memuse

import "sync/atomic"

// Counter is a count of bytes held. The zero Counter holds nothing; a nil
// *Counter counts nothing, so a holder made without one (in a package's
// own tests, say) needs no branch.
type Counter struct{ n atomic.Int64 }

// Add adds n bytes (negative: releases them).
func (c *Counter) Add(n int64) {
	if c != nil && n != 0 {
		c.n.Add(n)
	}
}

// MemoryBytes returns the bytes held (storage.MemoryReporter's method, so
// a Counter is one of the memory alarm's sources).
func (c *Counter) MemoryBytes() int64 {
	if c == nil {
		return 0
	}
	return c.n.Load()
}
