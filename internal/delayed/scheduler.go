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
// bindings reach now and returns once every one of them has stored it (or
// refused it: a full queue, a deleted one). An error means some message
// may not be stored; the scheduler keeps the whole batch and tries again.
type Router func(ctx context.Context, msgs []Message) error

// batchSize bounds the messages routed per store read.
const batchSize = 256

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

	// lateness, when set, is told how late each routed message was:
	// SetLateness.
	lateness atomic.Pointer[func(time.Duration)]
}

// SetLateness makes the scheduler tell f how late each message it routes
// was: the clock's time once every queue stored it, minus its due time
// (the benchmark's probe). f runs on the scheduler's goroutine; nil stops.
func (s *Scheduler) SetLateness(f func(time.Duration)) {
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
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for _, st := range stores {
		if q := st.LastSeq(); q > s.seq.Load() {
			s.seq.Store(q)
		}
	}
	s.next.Store(idle)
	return s
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
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) run() {
	defer close(s.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// The routing of a batch waits on queues; Close ends that wait.
		select {
		case <-s.stop:
			cancel()
		case <-s.done:
		}
	}()
	for {
		next, err := s.routeDue(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("delayed: routing due messages", "err", err)
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
			return
		case <-s.wake:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// routeDue routes everything due now and returns when the next message is
// due (idle: nothing held).
func (s *Scheduler) routeDue(ctx context.Context) (int64, error) {
	for {
		// Mark the goroutine awake before reading the stores, so a Hold
		// that writes after this read always wakes it.
		s.next.Store(awake)
		now := s.clock.Now()
		var batch []Message
		var from Store
		for _, st := range s.stores {
			msgs, err := st.Due(ctx, now.UnixNano(), batchSize)
			if err != nil {
				return 0, err
			}
			if len(msgs) > 0 {
				batch, from = msgs, st
				break
			}
		}
		if len(batch) == 0 {
			break
		}
		if err := s.route(ctx, batch); err != nil {
			return 0, err
		}
		if f := s.lateness.Load(); f != nil {
			at := s.clock.Now().UnixNano()
			for i := range batch {
				(*f)(time.Duration(at - batch[i].Due))
			}
		}
		if err := from.Delete(ctx, batch); err != nil {
			return 0, err
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	next := int64(idle)
	for _, st := range s.stores {
		k, ok, err := st.Next(ctx)
		if err != nil {
			return 0, err
		}
		if ok && k.Due < next {
			next = k.Due
		}
	}
	// A message held between the reads above and this Store saw awake
	// and woke us: nothing is missed.
	s.next.Store(next)
	return next, nil
}
