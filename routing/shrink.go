package routing

import "maps"

// The table's maps and destination lists are rebuilt once deletes left
// them a quarter of their largest size: a Go map keeps the table of its
// largest size for good, and so would a burst of queues or bindings
// declared and deleted. This is internal/shrink's rule, kept here because
// routing imports only the standard library.

// shrinkMin is the smallest peak at which a map or list is rebuilt.
const shrinkMin = 1024

// peak is the largest size a map reached since it was last built.
type peak struct{ n int }

// shrinkMap is called after a delete from m: it returns m, or a copy of m
// sized for what it holds once that is under a quarter of its peak.
func shrinkMap[M ~map[K]V, K comparable, V any](m M, p *peak) M {
	p.n = max(p.n, len(m)+1)
	if p.n < shrinkMin || len(m) >= p.n/4 {
		return m
	}
	out := make(M, len(m))
	maps.Copy(out, m)
	p.n = len(m)
	return out
}

// shrinkSlice is shrinkMap for a slice that shrinks from its end: its
// capacity is its peak.
func shrinkSlice[S ~[]E, E any](s S) S {
	if cap(s) < shrinkMin || len(s) >= cap(s)/4 {
		return s
	}
	return append(make(S, 0, len(s)), s...)
}
