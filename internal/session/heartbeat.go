package session

import (
	"container/heap"
	"sync"
	"time"
)

// heartbeats is the process's one heartbeat scheduler: every connection
// with heartbeats on is an entry in it, due every half interval, and one
// timer, armed for the earliest entry, runs the ticks of every entry due
// by then (heartbeatTick). So 10,000 idle connections cost one timer and
// a few wake-ups per second between them, each running the ticks of every
// connection due within heartbeatSlack, instead of a timer per connection
// and a goroutine per tick.
var heartbeats heartbeatSchedule

// heartbeatSlack is how early a tick may run, so that connections due
// close together share one wake-up of the scheduler. A tick early by this
// much is harmless: the heartbeat frame goes out a little sooner, and the
// dead-peer check (four ticks of silence) is 0.2 s short of two intervals
// at worst, against RabbitMQ's own jitter of a tick.
const heartbeatSlack = 50 * time.Millisecond

// heartbeatSchedule is a min-heap of connections by due time under one
// mutex, with the one timer. Lock order: a connection's outbox lock, then
// mu; mu is never held while calling into a connection.
type heartbeatSchedule struct {
	mu    sync.Mutex
	conns heartbeatHeap
	timer *time.Timer // nil until the first entry
	armed time.Time   // when timer fires; zero when stopped
	due   []*Conn     // fire's scratch list, reused
}

// heartbeatEntry is a connection's place in the schedule, kept in its
// outbox under heartbeatSchedule.mu.
type heartbeatEntry struct {
	at    time.Time // next tick
	index int       // in heartbeatSchedule.conns; -1 when not scheduled
}

// add schedules c's ticks every half, the first one half from now.
func (s *heartbeatSchedule) add(c *Conn, half time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.out.hb.at = time.Now().Add(half)
	heap.Push(&s.conns, c)
	s.armLocked()
}

// remove takes c out of the schedule; a no-op when it is not in it.
func (s *heartbeatSchedule) remove(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := c.out.hb.index; i >= 0 && i < len(s.conns) && s.conns[i] == c {
		heap.Remove(&s.conns, i)
		s.armLocked()
	}
}

// armLocked sets the timer for the earliest entry, or stops it when there
// is none.
func (s *heartbeatSchedule) armLocked() {
	if len(s.conns) == 0 {
		if s.timer != nil && !s.armed.IsZero() {
			s.timer.Stop()
			s.armed = time.Time{}
		}
		return
	}
	next := s.conns[0].out.hb.at
	if !s.armed.IsZero() && !next.Before(s.armed) {
		return // fires in time for it
	}
	d := max(time.Until(next), 0)
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.fire)
	} else {
		s.timer.Reset(d)
	}
	s.armed = next
}

// fire runs the ticks of every entry due by now plus heartbeatSlack, each
// rescheduled half an interval later first, then re-arms the timer.
func (s *heartbeatSchedule) fire() {
	s.mu.Lock()
	s.armed = time.Time{}
	now := time.Now()
	due := s.due[:0]
	for len(s.conns) > 0 {
		c := s.conns[0]
		if c.out.hb.at.Sub(now) > heartbeatSlack {
			break
		}
		// Half an interval from now, not from when it was due: a late
		// scheduler does not make ticks pile up.
		c.out.hb.at = now.Add(c.out.heartbeatHalf)
		heap.Fix(&s.conns, 0)
		due = append(due, c)
	}
	s.armLocked()
	s.due = nil // a tick may add or remove entries meanwhile
	s.mu.Unlock()
	for i, c := range due {
		c.heartbeatTick()
		due[i] = nil
	}
	s.mu.Lock()
	if s.due == nil {
		s.due = due[:0]
	}
	s.mu.Unlock()
}

// len returns the number of scheduled connections.
func (s *heartbeatSchedule) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// heartbeatHeap orders connections by their next tick (container/heap).
type heartbeatHeap []*Conn

func (h heartbeatHeap) Len() int           { return len(h) }
func (h heartbeatHeap) Less(i, j int) bool { return h[i].out.hb.at.Before(h[j].out.hb.at) }
func (h heartbeatHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].out.hb.index = i
	h[j].out.hb.index = j
}

func (h *heartbeatHeap) Push(x any) {
	c := x.(*Conn)
	c.out.hb.index = len(*h)
	*h = append(*h, c)
}

func (h *heartbeatHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	c.out.hb.index = -1
	return c
}
