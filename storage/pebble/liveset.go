package pebble

import (
	"math/bits"
	"slices"
)

// chunkBits is how many offsets one liveSet chunk covers. A chunk is 128
// bytes of bits: a queue whose live messages are contiguous costs about one
// bit per message, and one stuck message costs one chunk, not a bit for every
// offset published after it.
const (
	chunkBits  = 1024
	chunkWords = chunkBits / 64
	// maxFreeChunks bounds the chunks kept for reuse, so a steady queue
	// allocates none while a drained one gives its memory back.
	maxFreeChunks = 8
)

type chunk struct {
	bits [chunkWords]uint64
	n    int // bits set
}

// liveSet is the set of a shard's live offsets, kept in memory so that
// DeleteByOffsets knows which offsets exist without reading Pebble. It is
// not safe for concurrent use: the shard's mutex guards it.
type liveSet struct {
	chunks map[uint64]*chunk // offset / chunkBits -> its bits
	count  uint64
	free   []*chunk
	// last caches the chunk most recently used: appends and acks walk
	// offsets in order, so most lookups hit it.
	last    *chunk
	lastKey uint64
	// dirty lists the keys of the chunks changed since the last
	// takeDirty, for the store to write their pages; a chunk changed
	// twice in a row is listed once.
	dirty []uint64
}

func (l *liveSet) reset() {
	clear(l.chunks)
	l.count = 0
	l.last = nil
	l.dirty = l.dirty[:0]
}

func (l *liveSet) touch(key uint64) {
	if n := len(l.dirty); n == 0 || l.dirty[n-1] != key {
		l.dirty = append(l.dirty, key)
	}
}

// takeDirty returns the keys of the chunks changed since the last call,
// each once, and forgets them. The slice is valid until the next change.
func (l *liveSet) takeDirty() []uint64 {
	d := l.dirty
	if len(d) > 1 {
		slices.Sort(d)
		d = slices.Compact(d)
	}
	l.dirty = l.dirty[:0]
	return d
}

// pageKeys returns the keys of every chunk that has, or may still have, a
// page: those holding an offset and those changed since the last takeDirty.
func (l *liveSet) pageKeys() []uint64 {
	keys := make([]uint64, 0, len(l.chunks)+len(l.dirty))
	for k := range l.chunks {
		keys = append(keys, k)
	}
	keys = append(keys, l.dirty...)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// chunkAt returns the chunk with key, nil when no offset in it is set.
func (l *liveSet) chunkAt(key uint64) *chunk { return l.chunks[key] }

// load adds chunk c, with key, to a set that does not hold that chunk
// yet (a page read from the store).
func (l *liveSet) load(key uint64, c *chunk) {
	if l.chunks == nil {
		l.chunks = make(map[uint64]*chunk)
	}
	l.chunks[key] = c
	l.count += uint64(c.n)
}

// offsets returns every offset in the set, in order.
func (l *liveSet) offsets() []uint64 {
	keys := make([]uint64, 0, len(l.chunks))
	for k := range l.chunks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]uint64, 0, l.count)
	for _, k := range keys {
		c := l.chunks[k]
		for w, word := range c.bits {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				out = append(out, k*chunkBits+uint64(w)*64+uint64(b))
				word &= word - 1
			}
		}
	}
	return out
}

// chunkFor returns the chunk holding off, creating it when create is set
// (nil when absent and not created).
func (l *liveSet) chunkFor(off uint64, create bool) *chunk {
	key := off / chunkBits
	if l.last != nil && l.lastKey == key {
		return l.last
	}
	c := l.chunks[key]
	if c == nil {
		if !create {
			return nil
		}
		if n := len(l.free); n > 0 {
			c = l.free[n-1]
			l.free = l.free[:n-1]
		} else {
			c = new(chunk)
		}
		if l.chunks == nil {
			l.chunks = make(map[uint64]*chunk)
		}
		l.chunks[key] = c
	}
	l.last, l.lastKey = c, key
	return c
}

// add marks off live; it reports whether it was not already.
func (l *liveSet) add(off uint64) bool {
	c := l.chunkFor(off, true)
	w, b := off%chunkBits/64, uint64(1)<<(off%64)
	if c.bits[w]&b != 0 {
		return false
	}
	c.bits[w] |= b
	c.n++
	l.count++
	l.touch(off / chunkBits)
	return true
}

// addRange marks the n offsets from first live. They must not be live yet
// (Append's offsets are new).
func (l *liveSet) addRange(first, n uint64) {
	for off, end := first, first+n; off < end; {
		c := l.chunkFor(off, true)
		// Fill whole words where possible: a batch of 256 is 4 words.
		w, b := off%chunkBits/64, off%64
		span := min(64-b, end-off)
		mask := ^uint64(0) >> (64 - span) << b
		added := bits.OnesCount64(mask &^ c.bits[w])
		c.bits[w] |= mask
		c.n += added
		l.count += uint64(added)
		if added > 0 {
			l.touch(off / chunkBits)
		}
		off += span
	}
}

// remove marks off dead; it reports whether it was live.
func (l *liveSet) remove(off uint64) bool {
	c := l.chunkFor(off, false)
	if c == nil {
		return false
	}
	w, b := off%chunkBits/64, uint64(1)<<(off%64)
	if c.bits[w]&b == 0 {
		return false
	}
	c.bits[w] &^= b
	c.n--
	l.count--
	l.touch(off / chunkBits)
	if c.n == 0 {
		key := off / chunkBits
		delete(l.chunks, key)
		if l.last == c {
			l.last = nil
		}
		if len(l.free) < maxFreeChunks {
			l.free = append(l.free, c) // all bits are clear already
		}
	}
	return true
}

// removeFrom marks every offset >= from dead and returns how many were
// live and one past the highest of them (from when none was). It visits
// each chunk once, not each offset.
func (l *liveSet) removeFrom(from uint64) (n, end uint64) {
	end = from
	fromKey := from / chunkBits
	for key, c := range l.chunks {
		if key < fromKey {
			continue
		}
		removed := 0
		for w := range c.bits {
			word := c.bits[w]
			if lo := key*chunkBits + uint64(w)*64; from > lo {
				if from-lo >= 64 {
					continue
				}
				word &= ^uint64(0) << (from - lo)
			}
			if word == 0 {
				continue
			}
			end = max(end, key*chunkBits+uint64(w)*64+uint64(63-bits.LeadingZeros64(word))+1)
			removed += bits.OnesCount64(word)
			c.bits[w] &^= word
		}
		if removed == 0 {
			continue
		}
		c.n -= removed
		n += uint64(removed)
		l.touch(key)
		if c.n == 0 {
			delete(l.chunks, key)
			if l.last == c {
				l.last = nil
			}
			if len(l.free) < maxFreeChunks {
				l.free = append(l.free, c)
			}
		}
	}
	l.count -= n
	return n, end
}

// contains reports whether off is live.
func (l *liveSet) contains(off uint64) bool {
	c := l.chunkFor(off, false)
	return c != nil && c.bits[off%chunkBits/64]&(1<<(off%64)) != 0
}

// first returns the lowest live offset >= from, or ok false when there is
// none. It walks chunks upward from from's, and falls back to looking at
// every chunk when the gap is wide (one old message and a recent burst).
func (l *liveSet) first(from uint64) (off uint64, ok bool) {
	if l.count == 0 {
		return 0, false
	}
	key := from / chunkBits
	for probes := 0; probes < 64; probes++ {
		if c := l.chunks[key]; c != nil {
			if off, ok := c.firstFrom(key, from); ok {
				return off, true
			}
		}
		key++
	}
	best, found := uint64(0), false
	for k, c := range l.chunks {
		if k < key || (found && k*chunkBits >= best) {
			continue
		}
		if o, ok := c.firstFrom(k, from); ok && (!found || o < best) {
			best, found = o, true
		}
	}
	return best, found
}

// firstFrom returns the lowest offset >= from set in c, the chunk with the
// given key.
func (c *chunk) firstFrom(key, from uint64) (uint64, bool) {
	base := key * chunkBits
	w := uint64(0)
	if from > base {
		w = (from - base) / 64
	}
	for ; w < chunkWords; w++ {
		word := c.bits[w]
		if lo := base + w*64; from > lo {
			word &= ^uint64(0) << (from - lo)
		}
		if word != 0 {
			return base + w*64 + uint64(bits.TrailingZeros64(word)), true
		}
	}
	return 0, false
}
