package delayed

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/clock"
)

// Router routes due messages: it hands each to the queues its exchange's
// bindings reach now, and calls done once every one of them has stored it
// (or refused it: a full queue, a deleted one), possibly before it
// returns, on any goroutine; done does not block. An error means some
// message may not be stored; the scheduler keeps the whole batch and
// routes it again later.
type Router func(ctx context.Context, msgs []Message, done func(error))

// batchSize bounds the messages routed per store read.
const batchSize = 256

// maxInflight bounds the batches routed and not yet stored by their
// queues. The scheduler routes the next due batch while earlier ones wait
// for their queues' (synced) writes, so a slow fsync delays the deletion
// of routed messages, not the routing of the next ones.
const maxInflight = 8

// Values of Scheduler.next besides due times.
const (
	idle  = 1<<63 - 1
	awake = -1 << 63
)

// retryAfter is how long the scheduler waits after a store or routing
// error before trying again.
const retryAfter = time.Second

// Scheduler is the broker's one timer for delayed messages: a goroutine
// that sleeps until the earliest message of its stores is due (by the
// broker's clock), routes every due message and deletes it once routed.
// Hold wakes it when a message due earlier than its timer arrives. Close
// stops it; whoever calls Start calls Close.
type Scheduler struct {
	stores []Store
	clock  clock.Clock
	route  Router
	log    *slog.Logger

	seq     atomic.Uint64
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started atomic.Bool

	// next is the due time the goroutine sleeps until (idle when
	// nothing is held, awake while it reads and routes), so Hold wakes
	// it only for an earlier message, or when it may have read the
	// stores before the message was written.
	next atomic.Int64
	// earliest is the due time of the earliest held message not being
	// routed, as the goroutine last read it (idle: none), and routing
	// counts the messages routed and not yet deleted from their store:
	// Idle reads both.
	earliest atomic.Int64
	routing  atomic.Int64
	// notified counts Notify calls and seen the count routeDue last
	// started from: between a wake and the goroutine marking itself
	// awake (it may be descheduled there) they differ, so Idle does not
	// read the state of the pass before.
	notified, seen atomic.Uint64

	// inflight holds the keys of the batches routed and not yet
	// stored; only the goroutine touches it. finished collects the
	// batches whose queues answered, for the goroutine to delete.
	inflight map[Key]struct{}
	batches  int
	fin      struct {
		sync.Mutex
		list []finished
	}
	// retryAt, after a failure, is the time before which nothing is
	// routed (the goroutine's).
	retryAt int64

	// lateness, when set, is told how late each routed message was:
	// SetLateness.
	lateness atomic.Pointer[func(routed, stored time.Duration)]
}

// SetLateness makes the scheduler tell f how late each message it routes
// was (the benchmark's probe): routed when its queues were picked and it
// was handed to them, stored once every one of them stored it (synced,
// for a persistent message in a durable queue), each by the clock minus
// its due time. f runs on the scheduler's goroutine; nil stops.
func (s *Scheduler) SetLateness(f func(routed, stored time.Duration)) {
	if f == nil {
		s.lateness.Store(nil)
		return
	}
	s.lateness.Store(&f)
}

// NewScheduler returns a scheduler over stores (not started). Sequence
// numbers continue after the highest any store holds.
func NewScheduler(c clock.Clock, route Router, log *slog.Logger, stores ...Store) *Scheduler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Scheduler{
		stores: stores, clock: c, route: route, log: log,
		wake:     make(chan struct{}, 1),
		inflight: make(map[Key]struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	for _, st := range stores {
		if q := st.LastSeq(); q > s.seq.Load() {
			s.seq.Store(q)
		}
	}
	s.next.Store(idle)
	s.earliest.Store(awake) // nothing read yet: whatever is held may be due
	return s
}

// Idle reports whether nothing held is due by the clock and nothing
// routed is waiting for its queues or its deletion: Broker.WaitIdle
// waits for a message that came due to be in its queues (and gone from
// DelayedCount). A scheduler not running routes nothing: it is idle.
func (s *Scheduler) Idle() bool {
	if !s.started.Load() {
		return true
	}
	select {
	case <-s.done:
		return true // closed: nothing more is routed
	default:
	}
	if s.next.Load() == awake || s.notified.Load() != s.seen.Load() || s.routing.Load() > 0 {
		return false
	}
	return s.earliest.Load() > s.clock.Now().UnixNano()
}

// Start starts the goroutine.
func (s *Scheduler) Start() {
	s.started.Store(true)
	go s.run()
}

// Close stops the goroutine and waits for it (it finishes the batch it is
// routing). Idempotent; a scheduler never started just closes.
func (s *Scheduler) Close() {
	s.once.Do(func() { close(s.stop) })
	if s.started.Load() {
		<-s.done
	}
}

// Hold stores m in st, due m.Delay milliseconds from now by the clock,
// and wakes the timer if m is due before it. With sync the message is
// durable when Hold returns. It fills in m's Key.
func (s *Scheduler) Hold(ctx context.Context, st Store, m *Message, sync bool) error {
	s.assign(m)
	if err := st.Put(ctx, []Message{*m}, sync); err != nil {
		return err
	}
	s.held(m.Due)
	return nil
}

// assign gives m its key: due m.Delay milliseconds from now, and the next
// sequence number.
func (s *Scheduler) assign(m *Message) {
	m.Due = s.clock.Now().Add(time.Duration(m.Delay) * time.Millisecond).UnixNano()
	m.Seq = s.seq.Add(1)
}

// held is told that a message due at due was stored: it wakes the
// goroutine when that is earlier than its timer.
func (s *Scheduler) held(due int64) {
	if n := s.next.Load(); n == awake || due < n {
		s.Notify()
	}
}

// Notify makes the goroutine look at its stores again.
func (s *Scheduler) Notify() {
	s.notified.Add(1)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) run() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		next, err := s.routeDue(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("delayed: reading held messages", "err", err)
			next = s.clock.Now().Add(retryAfter).UnixNano()
		}
		var t clock.Timer
		if next != idle {
			t = s.clock.AfterFunc(time.Duration(next-s.clock.Now().UnixNano()), s.Notify)
			// The clock may have passed next between the read above and
			// the timer's start (a Fake is moved by another goroutine):
			// then nothing would fire it.
			if s.clock.Now().UnixNano() >= next {
				s.Notify()
			}
		}
		select {
		case <-s.stop:
			if t != nil {
				t.Stop()
			}
			s.drain(ctx)
			cancel()
			return
		case <-s.wake:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// finished is a routed batch whose queues answered.
type finished struct {
	batch    []Message
	from     Store
	err      error
	routedAt int64
}

// routeDue deletes the batches whose queues stored them, routes
// everything due now (up to maxInflight batches at once), and returns
// when the goroutine must look again (idle: nothing held; a finishing
// batch wakes it too).
func (s *Scheduler) routeDue(ctx context.Context) (int64, error) {
	// Mark the goroutine awake before reading the stores, so a Hold
	// that writes after the reads below always wakes it.
	s.next.Store(awake)
	s.seen.Store(s.notified.Load())
	if err := s.reap(ctx); err != nil {
		return 0, err
	}
	now := s.clock.Now().UnixNano()
	if now < s.retryAt {
		return s.retryAt, nil
	}
	for s.batches < maxInflight {
		var batch []Message
		var from Store
		for _, st := range s.stores {
			msgs, err := st.Due(ctx, now, batchSize+len(s.inflight))
			if err != nil {
				return 0, err
			}
			for _, m := range msgs {
				if _, busy := s.inflight[m.Key]; !busy && len(batch) < batchSize {
					batch = append(batch, m)
				}
			}
			if len(batch) > 0 {
				from = st
				break
			}
		}
		if len(batch) == 0 {
			break
		}
		for _, m := range batch {
			s.inflight[m.Key] = struct{}{}
		}
		s.routing.Add(int64(len(batch)))
		s.batches++
		routedAt := s.clock.Now().UnixNano()
		s.route(ctx, batch, func(err error) {
			s.fin.Lock()
			s.fin.list = append(s.fin.list, finished{batch: batch, from: from, err: err, routedAt: routedAt})
			s.fin.Unlock()
			s.Notify()
		})
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	next := int64(idle)
	busy := func(k Key) bool { _, ok := s.inflight[k]; return ok }
	for _, st := range s.stores {
		k, ok, err := st.Next(ctx, busy)
		if err != nil {
			return 0, err
		}
		if ok && k.Due < next {
			next = k.Due
		}
	}
	s.earliest.Store(next)
	if s.batches >= maxInflight && next <= now {
		// Full: a finishing batch wakes the goroutine.
		next = idle
	}
	// A message held between the reads above and this Store saw awake
	// and woke us: nothing is missed.
	s.next.Store(next)
	return next, nil
}

// drain waits, at Close, for the routed batches' queues to answer (they
// stop after the scheduler) and deletes what they stored, so that a clean
// restart routes nothing twice; it gives up after drainTimeout, leaving
// the rest to be routed again after the restart (a duplicate, not a
// loss).
func (s *Scheduler) drain(ctx context.Context) {
	deadline := time.After(drainTimeout)
	for {
		_ = s.reap(ctx)
		if s.batches == 0 {
			return
		}
		select {
		case <-s.wake:
		case <-deadline:
			return
		}
	}
}

// drainTimeout bounds drain's wait, in real time: the broker is closing.
const drainTimeout = 5 * time.Second

// reap deletes the messages of the batches their queues stored, and
// forgets the failed ones, to be read and routed again after retryAfter.
func (s *Scheduler) reap(ctx context.Context) error {
	s.fin.Lock()
	list := s.fin.list
	s.fin.list = nil
	s.fin.Unlock()
	var firstErr error
	for _, f := range list {
		s.batches--
		if f.err == nil {
			if g := s.lateness.Load(); g != nil {
				at := s.clock.Now().UnixNano()
				for i := range f.batch {
					(*g)(time.Duration(f.routedAt-f.batch[i].Due), time.Duration(at-f.batch[i].Due))
				}
			}
			f.err = f.from.Delete(ctx, f.batch)
		}
		for _, m := range f.batch {
			delete(s.inflight, m.Key)
		}
		s.routing.Add(-int64(len(f.batch)))
		if f.err != nil && firstErr == nil {
			firstErr = f.err
		}
	}
	if firstErr != nil {
		s.retryAt = s.clock.Now().Add(retryAfter).UnixNano()
		s.earliest.Store(awake) // the failed batch is due again
		s.log.Error("delayed: routing due messages", "err", firstErr)
	}
	return nil
}
