package alarm

import (
	"sync/atomic"

	"github.com/warrenmq/broker/internal/dedup"
	"github.com/warrenmq/broker/internal/memuse"
	"github.com/warrenmq/broker/internal/rates"
	"github.com/warrenmq/broker/storage"
)

// Held is what the broker keeps in the heap besides its queues'
// messages, each part counted by its holder and added to the memory
// alarm's measure: the deduplication caches of exchanges in memory
// (bounded by their Budget: half the watermark) and the keys of
// deduplicating queues; delayed messages held in memory and those on
// their way to the delayed store; direct reply-to replies waiting for
// their requester; the rate history; and what a reply forwarder reports
// (a cluster's queues of replies for other members).
type Held struct {
	Dedup     *dedup.Budget
	DedupKeys memuse.Counter
	Delayed   memuse.Counter
	Replies   memuse.Counter
	Rates     atomic.Pointer[rates.Recorder] // set once the history starts
	Forwarder storage.MemoryReporter         // the reply forwarder, when it reports
}

// heldPart is one holder's bytes, under the name the alarm's log gives it.
type heldPart struct {
	name string
	n    int64
}

func (h *Held) parts() []heldPart {
	out := []heldPart{
		{"dedup_caches", h.Dedup.MemoryBytes()},
		{"dedup_queue_keys", h.DedupKeys.MemoryBytes()},
		{"delayed", h.Delayed.MemoryBytes()},
		{"replies", h.Replies.MemoryBytes()},
	}
	if r := h.Rates.Load(); r != nil {
		out = append(out, heldPart{"rates", r.MemoryBytes()})
	}
	if h.Forwarder != nil {
		out = append(out, heldPart{"forwarded_replies", h.Forwarder.MemoryBytes()})
	}
	return out
}

// Total adds up every part.
func (h *Held) Total() int64 {
	var n int64
	for _, p := range h.parts() {
		n += p.n
	}
	return n
}

// attrs are the parts as log attributes, in bytes.
func (h *Held) attrs() []any {
	var out []any
	for _, p := range h.parts() {
		out = append(out, p.name, p.n)
	}
	return out
}
