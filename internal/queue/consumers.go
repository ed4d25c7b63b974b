package queue

import "slices"

// consumerSet holds a queue's consumers so that registering, cancelling
// and serving one costs O(1) whatever their number (plus a search among
// the distinct priorities, which are few): a slice kept in order made
// basic.consume and basic.cancel linear, and so registering or closing
// tens of thousands of consumers on one queue quadratic.
//
// Consumers are grouped in levels by priority, highest first; each level
// is a ring in arrival order. byKey finds a consumer by owner and tag.
// The order is the one the slice had: by priority, then by arrival, so
// single active consumer serves the first consumer of the highest level.
type consumerSet struct {
	levels    []*consumerLevel // by priority, highest first
	byKey     map[consumerKey]*Consumer
	n         int
	exclusive int // exclusive consumers (at most one, and then alone)
	// next is the round-robin position when no consumer has a priority
	// (one level): the consumer acquire tries first.
	next *Consumer
}

type consumerKey struct {
	owner Owner
	tag   string
}

// consumerLevel is the ring of the consumers of one priority; first is
// the longest registered, or, once priorities are in use, the one served
// least recently.
type consumerLevel struct {
	priority int32
	first    *Consumer
	n        int
}

// consumerLinks are a registered Consumer's place in its queue's set,
// owned by the queue's actor.
type consumerLinks struct {
	prev, next *Consumer
	level      *consumerLevel
	sameKey    *Consumer // another consumer registered with the same owner and tag
}

func (s *consumerSet) len() int { return s.n }

// add appends c to the end of its priority level.
func (s *consumerSet) add(c *Consumer) {
	i, found := slices.BinarySearchFunc(s.levels, c.Priority, func(l *consumerLevel, p int32) int {
		switch {
		case l.priority > p:
			return -1
		case l.priority < p:
			return 1
		}
		return 0
	})
	if !found {
		s.levels = slices.Insert(s.levels, i, &consumerLevel{priority: c.Priority})
	}
	l := s.levels[i]
	c.links.level = l
	if l.first == nil {
		c.links.prev, c.links.next = c, c
		l.first = c
	} else {
		s.insertBefore(c, l.first)
	}
	l.n++
	s.n++
	if c.Exclusive {
		s.exclusive++
	}
	if s.byKey == nil {
		s.byKey = make(map[consumerKey]*Consumer)
	}
	k := consumerKey{c.Owner, c.Tag}
	c.links.sameKey = s.byKey[k]
	s.byKey[k] = c
}

// insertBefore links c into the ring just before at (at the end of the
// ring when at is its first).
func (s *consumerSet) insertBefore(c, at *Consumer) {
	p := at.links.prev
	c.links.prev, c.links.next = p, at
	p.links.next = c
	at.links.prev = c
}

// unlink takes c out of its ring, keeping first and next on consumers
// still there.
func (s *consumerSet) unlink(c *Consumer) {
	l := c.links.level
	if c.links.next == c { // the last one of its level
		l.first = nil
	} else {
		if l.first == c {
			l.first = c.links.next
		}
		c.links.prev.links.next = c.links.next
		c.links.next.links.prev = c.links.prev
	}
	if s.next == c {
		s.next = c.links.next
		if s.next == c {
			s.next = nil
		}
	}
	c.links.prev, c.links.next = nil, nil
}

// remove takes out every consumer registered with owner and tag.
func (s *consumerSet) remove(owner Owner, tag string) {
	k := consumerKey{owner, tag}
	c := s.byKey[k]
	if c == nil {
		return
	}
	delete(s.byKey, k)
	for ; c != nil; c = c.links.sameKey {
		l := c.links.level
		s.unlink(c)
		l.n--
		s.n--
		if c.Exclusive {
			s.exclusive--
		}
		if l.n == 0 {
			s.levels = slices.DeleteFunc(s.levels, func(x *consumerLevel) bool { return x == l })
		}
		c.links.level = nil
	}
}

// first returns the first consumer of the highest priority, or nil.
func (s *consumerSet) first() *Consumer {
	if len(s.levels) == 0 {
		return nil
	}
	return s.levels[0].first
}

// each calls fn for every consumer, in order.
func (s *consumerSet) each(fn func(*Consumer)) {
	for _, l := range s.levels {
		c := l.first
		for range l.n {
			next := c.links.next
			fn(c)
			c = next
		}
	}
}

// roundRobin returns the next consumer, from next on, that acquire
// accepts, and moves next past it; the order stays as it is. For queues
// whose consumers all have priority 0 (one level).
func (s *consumerSet) roundRobin(acquire func(*Consumer) bool) *Consumer {
	if len(s.levels) == 0 {
		return nil
	}
	l := s.levels[0]
	c := s.next
	if c == nil {
		c = l.first
	}
	for range l.n {
		next := c.links.next
		if acquire(c) {
			s.next = next
			return c
		}
		c = next
	}
	return nil
}

// byPriority returns the first consumer, highest priority first, that
// acquire accepts, and moves it behind the other consumers of its
// priority, so they take turns.
func (s *consumerSet) byPriority(acquire func(*Consumer) bool) *Consumer {
	for _, l := range s.levels {
		c := l.first
		for range l.n {
			next := c.links.next
			if acquire(c) {
				if c == l.first {
					l.first = next
				} else {
					// Out of its place, back in at the end of the ring.
					c.links.prev.links.next = next
					next.links.prev = c.links.prev
					s.insertBefore(c, l.first)
				}
				return c
			}
			c = next
		}
	}
	return nil
}

// reset forgets every consumer.
func (s *consumerSet) reset() {
	s.each(func(c *Consumer) { c.links = consumerLinks{} })
	*s = consumerSet{}
}
