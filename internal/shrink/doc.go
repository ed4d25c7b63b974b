// Package shrink gives back the memory of Go maps that have shrunk.
//
// A Go map keeps the table of the largest size it ever had: delete frees
// an entry's slot for reuse, never the table. A map whose entries come
// and go in bursts (queues declared and deleted, connections opened and
// closed, cursors of deleted queues) so holds the memory of its largest
// burst for good, and every map of that kind adds its share: a broker
// that once held 15,000 queues kept megabytes of empty tables after
// deleting them all.
//
// Map rebuilds a map once it holds under a quarter of the largest size
// it reached since it was last built, and only when that size was at
// least MinPeak entries (the table of a small map is not worth a copy).
// The copy costs one insert per entry left, paid for by the three
// quarters of the peak deleted since, so the cost of a delete stays O(1)
// amortised.
//
// Call Map after each delete from the map (or Peak.Saw before a loop of
// deletes and Map after it), with the map's own Peak, under whatever
// guards the map: it returns either the same map or a new one,
// which the caller stores in place of the old. Nobody may keep using the
// old map (an iteration in progress, a reader holding it without the
// lock); a map that is read without the writer's lock is not a candidate.
package shrink
