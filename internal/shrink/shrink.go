package shrink

import "maps"

// MinPeak is the smallest peak at which Map rebuilds: below it a map's
// table is a few KiB at most.
const MinPeak = 1024

// Peak is the largest size a map reached since it was last built, as Map
// tracks it. The zero Peak is ready to use; keep one per map, next to it.
type Peak struct{ n int }

// Saw records that the map held n entries: call it before deleting many
// entries at once (in a range loop, say), then Map once after them.
func (p *Peak) Saw(n int) { p.n = max(p.n, n) }

// Map is called after a delete from m: it returns m, or, when m holds
// under a quarter of its peak and the peak was at least MinPeak, a copy
// of m with a table sized for what it holds now. The peak is tracked here
// from the size m had before the delete, so every delete from m must be
// followed by a call, and inserts need none.
func Map[M ~map[K]V, K comparable, V any](m M, p *Peak) M {
	p.n = max(p.n, len(m)+1)
	if p.n < MinPeak || len(m) >= p.n/4 {
		return m
	}
	out := make(M, len(m))
	maps.Copy(out, m)
	p.n = len(m)
	return out
}

// Slice is Map for a slice that only shrinks from its end: it returns s,
// or a copy with room for what it holds now when it holds under a quarter
// of its capacity and that capacity is at least MinPeak. Its capacity is
// its peak, so it needs no Peak.
func Slice[S ~[]E, E any](s S) S {
	if cap(s) < MinPeak || len(s) >= cap(s)/4 {
		return s
	}
	return append(make(S, 0, len(s)), s...)
}
