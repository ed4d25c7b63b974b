// Package memuse counts the bytes the broker's caches and holding stores
// keep in the Go heap, so that the memory alarm counts them with the
// message bytes of its in-memory queues: deduplication caches and keys,
// delayed messages held in memory, direct reply-to replies waiting for
// their requester, the rate history.
//
// What a holder counts is an estimate of what it keeps (its keys and
// values, plus a fixed overhead per entry for the maps and lists around
// them, which each holder documents and a test of its own checks against
// the live heap), added when it keeps an entry and subtracted when it lets
// go of it. A Counter is safe from any goroutine: one atomic add per
// change, one load per sample of the broker's memory monitor.
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
