package scan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/unacked"
)

// Config is what the scanner reads and calls.
type Config struct {
	// Indexes are the unacked indexes to scan.
	Indexes []unacked.Index
	// Leader is the meta store's IsLeader. In shared mode every broker
	// enforces the consumer timeout and returns the deliveries of its
	// own earlier runs and dead connections; only the meta leader judges
	// other brokers' (Orphaned).
	Leader func() bool
	Shared bool
	// Node and Incarnation name this run of this broker, as its
	// deliveries are stamped.
	Node        string
	Incarnation uint64
	// PeerAlive says whether another broker is alive (shared mode); nil:
	// never judged dead.
	PeerAlive func(node string) bool
	// Conns maps the id of every live connection to it.
	Conns func() map[string]*session.Conn
	// Requeue hands orphaned deliveries back to their queues.
	Requeue func(ctx context.Context, entries []unacked.Entry)
	// TimeoutFor is a delivery's consumer timeout, TimedOut what is done
	// with one held longer.
	TimeoutFor func(unacked.Entry) time.Duration
	TimedOut   func(ctx context.Context, x unacked.Index, e unacked.Entry)
	// Now is the queues' clock (nil: time.Now): deliveries are stamped
	// with it, so the timeout must be measured with the same one.
	Now func() time.Time
	// Every is the configured pass interval (0: the default), Timeout the
	// broker-wide consumer timeout at start (<= 0: off).
	Every, Timeout time.Duration
	Logger         *slog.Logger
}

// Scanner runs the passes. Make it with New.
type Scanner struct {
	cfg      Config
	cancel   context.CancelFunc
	done     chan struct{}
	scanners []*unacked.Scanner // one per unacked index
	// timeout is the broker-wide consumer timeout in force, in
	// nanoseconds (<= 0: off): Config.Timeout, then SetTimeout's. retune
	// hands the goroutine the pass interval a new timeout needs
	// (Interval).
	timeout atomic.Int64
	retune  chan time.Duration
	// mu is held for a whole pass, so passes (the goroutine's, a test's)
	// never overlap; it guards live, the pass's snapshot of connections.
	mu   sync.Mutex
	live map[string]*session.Conn
}

// Interval is how often the scanner runs: every 5 s (or every set, when
// set), or twice per consumer timeout when that is shorter, so a timeout
// is enforced at most half a timeout late.
func Interval(set, timeout time.Duration) time.Duration {
	interval := unacked.DefaultScanInterval
	if set > 0 {
		interval = set
	}
	if timeout > 0 {
		interval = min(interval, max(timeout/2, 10*time.Millisecond))
	}
	return interval
}

// New makes the scanner of every index; Start starts it.
func New(c Config) (*Scanner, error) {
	s := &Scanner{cfg: c, retune: make(chan time.Duration, 1)}
	s.timeout.Store(int64(c.Timeout))
	leader := c.Leader
	if c.Shared {
		leader = func() bool { return true }
	}
	for _, x := range c.Indexes {
		sc, err := unacked.NewScanner(unacked.ScannerConfig{
			Index:      x,
			Leader:     leader,
			Orphaned:   s.Orphaned,
			Requeue:    c.Requeue,
			Logger:     c.Logger,
			Now:        c.Now,
			TimeoutFor: c.TimeoutFor,
			TimedOut:   func(ctx context.Context, e unacked.Entry) { c.TimedOut(ctx, x, e) },
		})
		if err != nil {
			return nil, fmt.Errorf("broker: scanner: %w", err)
		}
		s.scanners = append(s.scanners, sc)
	}
	return s, nil
}

// Start starts the goroutine; Stop stops it.
func (s *Scanner) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.done = make(chan struct{})
	go s.run(ctx, Interval(s.cfg.Every, max(s.cfg.Timeout, 0)))
}

// Stop stops the scanner and waits for its pass to finish. Safe to call
// when it never started.
func (s *Scanner) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
}

// Timeout is the broker-wide consumer timeout in force (<= 0: off).
func (s *Scanner) Timeout() time.Duration { return time.Duration(s.timeout.Load()) }

// SetTimeout changes the broker-wide consumer timeout; the pass interval
// follows it from the next tick.
func (s *Scanner) SetTimeout(d time.Duration) {
	s.timeout.Store(int64(d))
	interval := Interval(s.cfg.Every, max(d, 0))
	for {
		select {
		case s.retune <- interval:
			return
		default:
		}
		// Replace a retune the goroutine has not taken yet: the newest
		// timeout wins.
		select {
		case <-s.retune:
		default:
		}
	}
}

func (s *Scanner) run(ctx context.Context, interval time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case interval := <-s.retune:
			tick.Reset(interval)
			continue
		case <-tick.C:
		}
		if err := s.Pass(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("broker: unacked scan failed", "err", err)
		}
	}
}

// Pass runs one pass over every unacked index.
func (s *Scanner) Pass(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = s.cfg.Conns()
	defer func() { s.live = nil }()
	var errs []error
	for _, sc := range s.scanners {
		if err := sc.ScanOnce(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Lock holds off passes (and Unlock lets them run again): the tests call
// Orphaned as a pass would.
func (s *Scanner) Lock()   { s.mu.Lock() }
func (s *Scanner) Unlock() { s.mu.Unlock() }

// Conn finds a live connection by id: in the pass's snapshot, else (it
// may have connected since) among the current ones. Called during a pass
// only.
func (s *Scanner) Conn(id string) *session.Conn {
	if c, ok := s.live[id]; ok {
		return c
	}
	return s.cfg.Conns()[id]
}

// Orphaned reports whether nobody will ever settle the delivery e: it was
// made by an earlier run of this broker, or its connection is gone, or
// another broker made it and that broker is gone. Without shared mode
// another broker's entry is orphaned (the stores were another broker's
// before); in shared mode only on the meta leader, once PeerAlive says
// that broker is dead. A connection that died after the pass's snapshot
// still counts as live; the next pass catches it.
func (s *Scanner) Orphaned(e unacked.Entry) bool {
	if e.Broker != s.cfg.Node {
		if !s.cfg.Shared {
			return true
		}
		return s.cfg.Leader() && s.cfg.PeerAlive != nil && !s.cfg.PeerAlive(e.Broker)
	}
	if e.Incarnation != s.cfg.Incarnation {
		return true
	}
	return s.Conn(e.Connection) == nil
}
