package main

import (
	"encoding/binary"
	"math/bits"
)

// headerSize is the length of what every message body starts with: the
// publisher's sequence number (4 bytes) and the send time in nanoseconds
// since the run's start on the monotonic clock (8 bytes), as RabbitMQ's
// PerfTest does; the rest is padding. Publisher and consumers live in this
// process, so latency needs no clock sync.
const headerSize = 12

func putHeader(body []byte, seq uint32, sentNanos int64) {
	binary.BigEndian.PutUint32(body[0:4], seq)
	binary.BigEndian.PutUint64(body[4:12], uint64(sentNanos))
}

func parseHeader(body []byte) (seq uint32, sentNanos int64, ok bool) {
	if len(body) < headerSize {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(body[0:4]), int64(binary.BigEndian.Uint64(body[4:12])), true
}

// tracker checks that one consumer stream sees every sequence number of its
// publisher exactly once. It is owned by one goroutine; the counters it
// exports are copied out after that goroutine has stopped.
type tracker struct {
	seen      []uint64 // bitset by sequence number
	distinct  uint64
	dups      uint64
	reordered uint64 // seen after a higher number: reported, not a failure
	malformed uint64 // too short, or a number the publisher never reached
	next      uint32
}

// see records seq. bound is how many sequence numbers the publisher has
// started to send; anything at or above it did not come from this run's
// publisher, and is counted as malformed instead of growing the bitset to
// whatever a corrupt body says.
func (t *tracker) see(seq uint32, bound uint64) {
	if uint64(seq) >= bound {
		t.malformed++
		return
	}
	w := int(seq / 64)
	if w >= len(t.seen) {
		n := max(2*len(t.seen), w+1, 64)
		grown := make([]uint64, n)
		copy(grown, t.seen)
		t.seen = grown
	}
	bit := uint64(1) << (seq % 64)
	if t.seen[w]&bit != 0 {
		t.dups++
		return
	}
	t.seen[w] |= bit
	t.distinct++
	if seq < t.next {
		t.reordered++
	} else {
		t.next = seq + 1
	}
}

// notSeenOf counts the numbers of other that t never saw: with other the
// confirmed numbers, the confirmed messages lost.
func (t *tracker) notSeenOf(other *tracker) uint64 {
	var n uint64
	for w, bitsOther := range other.seen {
		var mine uint64
		if w < len(t.seen) {
			mine = t.seen[w]
		}
		n += uint64(bits.OnesCount64(bitsOther &^ mine))
	}
	return n
}

// missing counts the numbers below expected that were never seen.
func (t *tracker) missing(expected uint64) uint64 {
	var got uint64
	full := expected / 64
	for w := uint64(0); w < full && w < uint64(len(t.seen)); w++ {
		got += uint64(bits.OnesCount64(t.seen[w]))
	}
	if rest := expected % 64; rest != 0 && full < uint64(len(t.seen)) {
		got += uint64(bits.OnesCount64(t.seen[full] & (1<<rest - 1)))
	}
	return expected - got
}
