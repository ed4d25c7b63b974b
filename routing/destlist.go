package routing

// destKey names a binding destination: a queue, or an exchange when exchange
// is set. Queue and exchange names live in separate namespaces.
type destKey struct {
	name     string
	exchange bool
}

// dest is one distinct destination in a destList. refs counts the bindings
// that put it there: several bindings can lead from one index slot to the
// same destination (same key or pattern, different arguments), and the
// destination must stay until the last of them is removed.
type dest struct {
	queue string    // set for a queue destination
	x     *exchange // set for an exchange destination
	refs  int
}

// destList is the set of destinations one index slot routes to (a direct
// key, a fanout exchange, a topic trie node). Its items are distinct, so a
// route that reads a single destList needs no deduplication. Route only
// reads items; add and remove run under the caller's write lock.
type destList struct {
	items []dest
	// pos indexes items once the list is long enough for a linear scan to
	// hurt (fanout exchanges with thousands of queues); nil until then.
	// pos and items are rebuilt once removes left them a quarter of their
	// largest size (shrinkMap, shrinkSlice).
	pos     map[destKey]int
	posPeak peak
}

// posThreshold is the list length from which add and remove use pos.
const posThreshold = 16

func (l *destList) find(k destKey) int {
	if l.pos != nil {
		if i, ok := l.pos[k]; ok {
			return i
		}
		return -1
	}
	for i := range l.items {
		d := &l.items[i]
		if k.exchange {
			if d.x != nil && d.x.Name == k.name {
				return i
			}
		} else if d.x == nil && d.queue == k.name {
			return i
		}
	}
	return -1
}

func keyOf(d *dest) destKey {
	if d.x != nil {
		return destKey{name: d.x.Name, exchange: true}
	}
	return destKey{name: d.queue}
}

// add records one more binding to k; x is the destination exchange when
// k.exchange is set.
func (l *destList) add(k destKey, x *exchange) {
	if i := l.find(k); i >= 0 {
		l.items[i].refs++
		return
	}
	d := dest{refs: 1}
	if k.exchange {
		d.x = x
	} else {
		d.queue = k.name
	}
	l.items = append(l.items, d)
	if l.pos != nil {
		l.pos[k] = len(l.items) - 1
	} else if len(l.items) >= posThreshold {
		l.pos = make(map[destKey]int, len(l.items))
		for i := range l.items {
			l.pos[keyOf(&l.items[i])] = i
		}
	}
}

// remove drops one binding to k and reports whether the list is now empty.
func (l *destList) remove(k destKey) (empty bool) {
	i := l.find(k)
	if i < 0 {
		return len(l.items) == 0
	}
	if l.items[i].refs--; l.items[i].refs > 0 {
		return false
	}
	last := len(l.items) - 1
	if i != last {
		l.items[i] = l.items[last]
		if l.pos != nil {
			l.pos[keyOf(&l.items[i])] = i
		}
	}
	l.items[last] = dest{} // drop references for the GC
	l.items = shrinkSlice(l.items[:last])
	if l.pos != nil {
		delete(l.pos, k)
		l.pos = shrinkMap(l.pos, &l.posPeak)
		if len(l.items) < posThreshold/2 {
			l.pos, l.posPeak = nil, peak{}
		}
	}
	return len(l.items) == 0
}

func (l *destList) empty() bool { return len(l.items) == 0 }
