// Package heaptest measures the live heap for tests that assert bounded
// memory through runtime/metrics instead of wall time or RSS.
package heaptest
