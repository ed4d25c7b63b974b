package delayed

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/memuse"
	"github.com/warrenmq/broker/meta"
)

// ErrClosed is what a Hold after Close reports.
var ErrClosed = errors.New("delayed: closed")

// Service is a broker's delayed messages: two stores (Durable for durable
// exchanges: the broker's Pebble database when it has one; Transient, in
// memory, for the others), the Scheduler that routes them when due, and a
// writer goroutine that stores held messages in batches, so that a
// publisher's channel does not wait for each fsync and concurrent
// publishes share one.
type Service struct {
	durable, transient Store
	sched              *Scheduler

	in      chan holdReq
	stop    chan struct{}
	done    chan struct{}
	mu      sync.RWMutex // closed; Hold's send under RLock
	closed  bool
	started bool

	unfollow func() // stops following a shared store (Replicated)

	// held counts the messages of the holds queued for the writer
	// (Message.HeapBytes each) until it hands them to their store (which
	// counts them from there when it keeps them in memory); nil: not
	// counted.
	held *memuse.Counter

	// pending counts the holds handed to Hold whose done has not
	// returned yet: Idle reads it, so Broker.WaitIdle waits for a
	// publish to a delayed exchange to be stored.
	pending atomic.Int64
}

type holdReq struct {
	m       Message
	durable bool
	sync    bool
	done    func(error)
}

// holdQueue bounds the holds waiting for the writer: beyond it Hold
// blocks, and so does the publisher's channel (back-pressure).
const holdQueue = 4096

// NewService returns a service over its two stores, routing due messages
// with route. Start starts its goroutines; Close stops them.
func NewService(c clock.Clock, durable, transient Store, route Router, log *slog.Logger) *Service {
	return &Service{
		durable: durable, transient: transient,
		sched: NewScheduler(c, route, log, durable, transient),
		in:    make(chan holdReq, holdQueue),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// CountHolds has the messages queued for the writer, up to holdQueue of
// them, count in held until the writer hands them to their store. Call it
// before Start.
func (s *Service) CountHolds(held *memuse.Counter) { s.held = held }

// Scheduler returns the service's scheduler (for SetLateness).
func (s *Service) Scheduler() *Scheduler { return s.sched }

// Start starts the writer and the scheduler. Call it once the vhosts can
// route: messages already due are routed at once.
func (s *Service) Start() {
	s.mu.Lock()
	s.started = true
	if r, ok := s.durable.(*Replicated); ok {
		if feed, ok := r.rs.(meta.ChangeFeed); ok {
			s.unfollow = s.follow(feed)
		}
	}
	s.mu.Unlock()
	go s.write()
	s.sched.Start()
}

// Close stops the writer (holds still queued are answered with
// ErrClosed) and the scheduler, and waits for both.
func (s *Service) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	started := s.started
	close(s.stop)
	unfollow := s.unfollow
	s.mu.Unlock()
	if unfollow != nil {
		unfollow()
	}
	if started {
		<-s.done
	}
	s.sched.Close()
}

// Hold queues m (VHost, Exchange, RoutingKey, CC, Properties, Body,
// Persistent and Delay set) to be held Delay milliseconds from now, by the
// clock. done is called, from the writer's goroutine, once the message is
// stored (durable when sync) or could not be; it must not block. A durable
// hold goes to the durable store.
func (s *Service) Hold(m Message, durable, sync bool, done func(error)) {
	s.sched.assign(&m)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		done(ErrClosed)
		return
	}
	s.pending.Add(1)
	answer := func(err error) {
		done(err)
		s.pending.Add(-1)
	}
	n := m.HeapBytes()
	s.held.Add(n)
	select {
	case s.in <- holdReq{m: m, durable: durable, sync: sync, done: answer}:
	case <-s.stop:
		s.held.Add(-n)
		answer(ErrClosed)
	}
}

// Idle reports whether every hold handed to Hold has been stored (or
// refused) and its done has returned, and the scheduler has routed
// every message due by the clock (Scheduler.Idle).
func (s *Service) Idle() bool { return s.pending.Load() == 0 && s.sched.Idle() }

func (s *Service) write() {
	defer close(s.done)
	var batch []holdReq
	for {
		select {
		case r := <-s.in:
			batch = append(batch[:0], r)
		case <-s.stop:
			for {
				select {
				case r := <-s.in:
					s.held.Add(-r.m.HeapBytes())
					r.done(ErrClosed)
				default:
					return
				}
			}
		}
	drain:
		for len(batch) < batchSize {
			select {
			case r := <-s.in:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		// The store counts what it keeps in memory from Put on: the
		// holds stop counting first, so no message counts twice.
		for i := range batch {
			s.held.Add(-batch[i].m.HeapBytes())
		}
		s.store(batch)
		clear(batch)
	}
}

// store writes one batch: one Put per store, synced when any hold asks.
func (s *Service) store(batch []holdReq) {
	for _, durable := range []bool{true, false} {
		var msgs []Message
		sync := false
		for _, r := range batch {
			if r.durable == durable {
				msgs = append(msgs, r.m)
				sync = sync || r.sync
			}
		}
		if len(msgs) == 0 {
			continue
		}
		st := s.transient
		if durable {
			st = s.durable
		}
		err := st.Put(context.Background(), msgs, sync)
		if err == nil {
			earliest := msgs[0].Due
			for _, m := range msgs {
				earliest = min(earliest, m.Due)
			}
			s.sched.held(earliest)
		}
		for _, r := range batch {
			if r.durable == durable {
				r.done(err)
			}
		}
	}
}

// Count returns how many messages an exchange holds.
func (s *Service) Count(vhost, exchange string) int64 {
	return s.durable.Count(vhost, exchange) + s.transient.Count(vhost, exchange)
}

// Len returns how many messages the service holds.
func (s *Service) Len() int64 { return s.durable.Len() + s.transient.Len() }

// Peek returns up to max of an exchange's held messages, earliest first.
func (s *Service) Peek(ctx context.Context, vhost, exchange string, max int) ([]Message, error) {
	a, err := s.durable.Peek(ctx, vhost, exchange, max)
	if err != nil {
		return nil, err
	}
	b, err := s.transient.Peek(ctx, vhost, exchange, max)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, min(len(a)+len(b), max))
	for len(out) < max && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || len(a) > 0 && a[0].Key.Less(b[0].Key) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out, nil
}

// DropExchange deletes every message held for an exchange (it was
// deleted) and returns how many.
func (s *Service) DropExchange(ctx context.Context, vhost, exchange string) (int, error) {
	n, err := s.durable.DeleteExchange(ctx, vhost, exchange)
	if err != nil {
		return n, err
	}
	m, err := s.transient.DeleteExchange(ctx, vhost, exchange)
	return n + m, err
}
