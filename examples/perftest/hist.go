package main

import (
	"math"
	"math/bits"
	"time"
)

// histogram records latencies in nanoseconds in log-linear buckets: values
// below 128 ns exactly, above that 64 buckets per power of two, so a
// reported percentile is within 1/64 (1.6 %) of the true value. It costs
// 30 KiB and no allocation per record, which matters because in-process runs
// count the client's RSS as the broker's. Not safe for concurrent use: each
// consumer goroutine owns one and they are merged at the end.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    int64
}

const (
	histSubBits = 6                // 64 sub-buckets per octave
	histExact   = 2 << histSubBits // 0..127 ns are their own buckets
	// histBuckets counts every bucket: a non-negative int64 has at most 63
	// bits, and values of 8..63 bits use shifts 1..56 below.
	histBuckets = histExact + (63-histSubBits-1)<<histSubBits
)

func histIndex(v int64) int {
	if v < 0 {
		v = 0
	}
	if v < histExact {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits - 1
	top := int(uint64(v) >> shift) // in [64, 128)
	return histExact + (shift-1)<<histSubBits + top - 1<<histSubBits
}

// histValue is the midpoint of bucket i, the value a percentile reports.
func histValue(i int) int64 {
	if i < histExact {
		return int64(i)
	}
	i -= histExact
	shift := i>>histSubBits + 1
	top := int64(i&(1<<histSubBits-1) + 1<<histSubBits)
	lo := top << shift
	return lo + (int64(1)<<shift)/2
}

func (h *histogram) record(d int64) {
	if d < 0 {
		// Clocks are read in this process on both ends, so a negative
		// latency can only come from a corrupt body; count it as zero
		// rather than drop it, so totals still add up.
		d = 0
	}
	h.counts[histIndex(d)]++
	h.n++
	if d > h.max {
		h.max = d
	}
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0 < q <= 1) by the nearest-rank rule,
// or 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			// A bucket's midpoint can exceed the exact maximum.
			return time.Duration(min(histValue(i), h.max))
		}
	}
	return time.Duration(h.max)
}
