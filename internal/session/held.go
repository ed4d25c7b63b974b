package session

import (
	"sync"

	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
)

// Publishes are handed to their queues one batch per read: the reader
// holds the routed publishes of the frames one socket read brought, and
// hands each target queue its share with one PublishBatch (one mailbox
// lock, at most one wake-up of the queue's goroutine) once the read's
// frames are handled, instead of one hand-off per message. The reader
// hands over (handOver) before anything that may wait or that must see
// the publishes in their queues:
//
//   - before a ReadFrame that may read from the socket (no whole frame
//     buffered), so nothing waits on input while it holds publishes;
//   - before any frame but a publish's (basic.publish and its content):
//     a basic.get, a purge, a commit, a channel's close and every other
//     method sees the publishes that came before it, in order;
//   - before waiting for the outbox to drain or for an alarm to clear;
//   - when the read loop ends, whatever ended it;
//   - once maxHeldPublishes or maxHeldBytes are held, so a read of many
//     frames is handed over in bounded pieces.
//
// Only the reader goroutine touches heldPublishes. A direct connection
// (no reader) hands every publish over at once, as does a transport that
// cannot tell whether a frame is buffered.

const (
	// maxHeldPublishes bounds the publishes held for one hand-off, and
	// maxHeldTargets the distinct queues they go to.
	maxHeldPublishes = 256
	maxHeldTargets   = 16
	// maxHeldBytes bounds the message bytes held: they count towards no
	// queue (nor the memory alarm) until handed over.
	maxHeldBytes = 256 << 10
)

type heldPublishes struct {
	targets []heldTarget
	last    int // index in targets of the last queue added to
	n       int // publishes held
	bytes   int // their properties and bodies
	// published counts routed publishes not yet added to
	// Counters.Publish: one atomic add a hand-over, not one a publish.
	published uint64
}

// heldTarget is one queue's share of the held publishes. ps comes from
// publishingPool and goes back to it on hand-over, so an idle connection
// holds none.
type heldTarget struct {
	q  *vhost.Queue
	ps *[]queue.Publishing
}

var publishingPool = sync.Pool{New: func() any {
	s := make([]queue.Publishing, 0, 32)
	return &s
}}

// hold adds one routed publish for q; it reports whether the reader
// should hand over now (a bound is reached).
func (h *heldPublishes) hold(q *vhost.Queue, p queue.Publishing) bool {
	t := h.find(q)
	*t.ps = append(*t.ps, p)
	h.n++
	h.bytes += len(p.Rec.Properties) + len(p.Rec.Body)
	return h.n >= maxHeldPublishes || h.bytes >= maxHeldBytes || len(h.targets) >= maxHeldTargets
}

// find returns q's target, adding it when q has none yet.
func (h *heldPublishes) find(q *vhost.Queue) *heldTarget {
	if h.last < len(h.targets) && h.targets[h.last].q == q {
		return &h.targets[h.last]
	}
	for i := range h.targets {
		if h.targets[i].q == q {
			h.last = i
			return &h.targets[i]
		}
	}
	h.targets = append(h.targets, heldTarget{q: q, ps: publishingPool.Get().(*[]queue.Publishing)})
	h.last = len(h.targets) - 1
	return &h.targets[h.last]
}

// handOver hands every held publish to its queue, in the order held. A
// queue deleted since the publish was routed drops its share, as a
// queue deleted under Publish does: the publishes are still answered
// (acked) to a confirming publisher, as in RabbitMQ.
func (c *Conn) handOver() {
	h := &c.held
	if h.published > 0 {
		if n := c.cfg.Counters; n != nil {
			n.Publish.Add(h.published)
		}
		h.published = 0
	}
	if h.n == 0 {
		return
	}
	for i := range h.targets {
		t := &h.targets[i]
		ps := *t.ps
		if err := t.q.PublishBatch(ps); err != nil {
			for j := range ps {
				if cf, ok := ps[j].Conf.(*confirms); ok {
					cf.stored(cf.ch, ps[j].Seq, false)
				}
			}
		}
		clear(ps) // the bodies are the queues' now
		*t.ps = ps[:0]
		if cap(ps) <= 4*maxHeldPublishes {
			publishingPool.Put(t.ps)
		}
		*t = heldTarget{}
	}
	h.targets = h.targets[:0]
	h.last, h.n, h.bytes = 0, 0, 0
}

// handOverIfIdle hands over when the next ReadFrame may read from the
// stream, and drops the read's arena.
func (c *Conn) handOverIfIdle() {
	if c.frames == nil || c.frames.FrameBuffered() {
		return
	}
	c.arena = nil // the read's frames are handled (arena.go)
	c.handOver()
}
