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
