package unacked

import (
	"fmt"
	"iter"
	"math"
	"slices"
)

// Ref is what a channel keeps about one unacked delivery: where the message
// lives and which consumer got it, enough to settle or requeue it.
type Ref struct {
	Key
	// ConsumerTag is the consumer the message went to, "" for basic.get.
	// Per-consumer prefetch credit goes back to it on settle.
	ConsumerTag string
	// Redelivered is the flag the delivery carried.
	Redelivered bool
}

// Table is the unacked deliveries of one channel, by delivery tag. The
// channel assigns tags increasing from 1 (AMQP 0-9-1 §1.8.3.10: tags are
// channel-scoped and count up); deliveries that need no ack may skip tags.
//
// The zero Table is empty and ready to use. A Table is not safe for
// concurrent use: the channel's goroutine owns it.
//
// Entries sit in a slice sorted by tag. Settled entries are marked and
// skipped; the window's head moves past them, and when fewer than a quarter
// of the window is live it is compacted. So acking in order is O(1), a
// multiple ack is O(entries settled), and memory follows the live count
// rather than the span of tags.
type Table[V any] struct {
	slots []slot[V] // slots[head:] is the window, sorted by tag
	head  int       // slots[head] is live unless the window is empty
	live  int
	last  uint64 // the highest tag ever added
}

type slot[V any] struct {
	tag  uint64
	v    V
	live bool
}

// Compaction thresholds: a window smaller than minCompact is never
// compacted (too small to matter), and an emptied slice larger than
// maxIdleCap is released rather than kept for reuse.
const (
	minCompact = 32
	maxIdleCap = 1024
)

// Add records v under tag. Tags must be strictly increasing across the
// table's life, starting above 0; anything else is an error and changes
// nothing.
func (t *Table[V]) Add(tag uint64, v V) error {
	if tag <= t.last {
		return fmt.Errorf("unacked: delivery tag %d added after tag %d", tag, t.last)
	}
	if free := len(t.slots) - t.live; len(t.slots) == cap(t.slots) && free > 0 && 4*free >= len(t.slots) {
		// Reuse the room settled slots take rather than grow; only when it
		// frees a quarter, so the copy is paid for by the settles.
		t.compact()
	}
	t.slots = append(t.slots, slot[V]{tag: tag, v: v, live: true})
	t.live++
	t.last = tag
	return nil
}

// Get returns the value under tag without settling it.
func (t *Table[V]) Get(tag uint64) (V, bool) {
	i := t.find(tag)
	if i < 0 {
		var zero V
		return zero, false
	}
	return t.slots[i].v, true
}

// Take settles tag and returns its value; false if tag is not unacked
// (never added, or already settled).
func (t *Table[V]) Take(tag uint64) (V, bool) {
	var zero V
	i := t.find(tag)
	if i < 0 {
		return zero, false
	}
	v := t.slots[i].v
	t.slots[i].v, t.slots[i].live = zero, false // drop references now
	t.live--
	t.tidy()
	return v, true
}

// TakeUpTo settles every unacked tag <= tag (basic.ack with multiple=true),
// calling fn for each in tag order, and returns how many it settled. fn
// must not modify the table. For AMQP's "multiple with tag 0 means all",
// the caller uses TakeAll.
func (t *Table[V]) TakeUpTo(tag uint64, fn func(tag uint64, v V)) int {
	var zero V
	n := 0
	i := t.head
	for ; i < len(t.slots) && t.slots[i].tag <= tag; i++ {
		s := &t.slots[i]
		if !s.live {
			continue
		}
		v := s.v
		s.v, s.live = zero, false
		t.live--
		n++
		if fn != nil {
			fn(s.tag, v)
		}
	}
	t.head = i
	t.tidy()
	return n
}

// TakeAll settles everything, calling fn in tag order (channel close,
// basic.recover, multiple ack of tag 0), and returns how many it settled.
// fn must not modify the table.
func (t *Table[V]) TakeAll(fn func(tag uint64, v V)) int {
	return t.TakeUpTo(math.MaxUint64, fn)
}

// Len returns the number of unacked entries.
func (t *Table[V]) Len() int { return t.live }

// All iterates over the unacked entries in tag order. The table must not
// be modified during the iteration.
func (t *Table[V]) All() iter.Seq2[uint64, V] {
	return func(yield func(uint64, V) bool) {
		for i := t.head; i < len(t.slots); i++ {
			if s := &t.slots[i]; s.live && !yield(s.tag, s.v) {
				return
			}
		}
	}
}

// find returns the slot index of a live tag, or -1.
func (t *Table[V]) find(tag uint64) int {
	w := t.slots[t.head:]
	if len(w) == 0 || tag < w[0].tag || tag > w[len(w)-1].tag {
		return -1
	}
	// Each slot uses up at least one tag, so tag sits at index
	// tag-first or before; with no gaps it sits exactly there.
	guess := tag - w[0].tag
	if guess < uint64(len(w)) && w[guess].tag == tag {
		return liveIndex(w, int(guess), t.head)
	}
	hi := len(w)
	if guess < uint64(hi) {
		hi = int(guess)
	}
	i, found := slices.BinarySearchFunc(w[:hi], tag, func(s slot[V], tag uint64) int {
		switch {
		case s.tag < tag:
			return -1
		case s.tag > tag:
			return 1
		}
		return 0
	})
	if !found {
		return -1
	}
	return liveIndex(w, i, t.head)
}

func liveIndex[V any](w []slot[V], i, head int) int {
	if !w[i].live {
		return -1
	}
	return head + i
}

// tidy restores the invariants after settling: the head is live or the
// window is empty, and a mostly settled window is compacted.
func (t *Table[V]) tidy() {
	for t.head < len(t.slots) && !t.slots[t.head].live {
		t.head++
	}
	if t.live == 0 {
		if cap(t.slots) > maxIdleCap {
			t.slots = nil // a burst is over; don't hold its memory
		} else {
			t.slots = t.slots[:0]
		}
		t.head = 0
		return
	}
	if w := len(t.slots) - t.head; w >= minCompact && t.live < w/4 {
		t.compact()
	}
}

// compact moves the live slots to the front, in order, and shrinks a slice
// that became far larger than what it holds.
func (t *Table[V]) compact() {
	dst := t.slots[:0]
	if cap(t.slots) > maxIdleCap && cap(t.slots) > 4*t.live {
		dst = make([]slot[V], 0, 2*t.live)
	}
	for i := t.head; i < len(t.slots); i++ {
		if t.slots[i].live {
			dst = append(dst, t.slots[i])
		}
	}
	clear(t.slots[len(dst):len(t.slots)]) // drop references in the old tail
	t.slots, t.head = dst, 0
}
