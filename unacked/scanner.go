package unacked

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Scanner defaults, used when the ScannerConfig field is zero.
const (
	DefaultScanInterval = 5 * time.Second
	DefaultBatchSize    = 256
	DefaultPassLimit    = 1 << 16
)

// ScannerConfig configures a Scanner. Index is required; every other field
// has a default. NewScanner copies it.
type ScannerConfig struct {
	// Index is the unacked index to scan.
	Index Index
	// Leader reports whether this node runs leader-only work; a pass on a
	// follower does nothing. Default: always the leader (a single node),
	// usually meta.Store.IsLeader.
	Leader func() bool
	// Interval is the time between passes of Run. Default
	// DefaultScanInterval.
	Interval time.Duration
	// Now is the clock DeliveryTimeout is measured with. Default time.Now.
	Now func() time.Time
	// Orphaned reports whether the owner of a Delivered entry (its broker,
	// incarnation or connection) is gone, so nobody will ever settle it.
	// Default: nothing is orphaned.
	Orphaned func(Entry) bool
	// Requeue is the broker's requeue primitive, handed orphaned entries in
	// batches of at most BatchSize. It may keep the slice. It has no error:
	// an entry it fails to requeue is still Delivered and orphaned, so the
	// next pass offers it again. Required when Orphaned is set.
	Requeue func(ctx context.Context, entries []Entry)
	// BatchSize caps the entries of one Requeue call. Default
	// DefaultBatchSize.
	BatchSize int
	// PassLimit caps the entries one pass acts on (requeued plus timed
	// out), which bounds the pass's memory; the rest wait for the next pass.
	// Default DefaultPassLimit.
	PassLimit int
	// DeliveryTimeout is how long a delivery may stay unacked before
	// TimedOut is called for it, as RabbitMQ's consumer timeout. 0 disables.
	DeliveryTimeout time.Duration
	// TimedOut is called once per delivery that outlived DeliveryTimeout and
	// is not orphaned; the broker closes the owning channel with 406
	// PRECONDITION_FAILED, which requeues it. Required when DeliveryTimeout
	// is set.
	TimedOut func(ctx context.Context, e Entry)
	// TimeoutFor, when set, is the delivery timeout of e in place of
	// DeliveryTimeout (0: none), for timeouts set per queue or per
	// consumer. It is called during the index scan, so it must not use
	// the index, and must be cheap. Requires TimedOut.
	TimeoutFor func(e Entry) time.Duration
	// Logger receives scan failures from Run. Default: discarded.
	Logger *slog.Logger
}

// Scanner finds the unacked deliveries nobody will settle: those whose
// owner died (requeued) and those held past the delivery timeout
// (reported). It runs on the meta leader only.
type Scanner struct {
	cfg ScannerConfig
	// passMu keeps passes from overlapping; it is held for a whole pass,
	// callbacks included, on purpose.
	passMu sync.Mutex
	// reported holds the deliveries TimedOut was called for that were still
	// in the index at the last complete pass, so each is reported once. It
	// is bounded by the timed-out entries present in the index.
	reported map[delivery]struct{}
}

// delivery identifies one delivery of one message: a redelivery of the same
// offset is a new delivery and may time out again.
type delivery struct {
	Key
	connection  string
	channel     uint16
	tag         uint64
	deliveredAt int64
}

func deliveryOf(e *Entry) delivery {
	return delivery{e.Key, e.Connection, e.Channel, e.DeliveryTag, e.DeliveredAt}
}

// NewScanner checks cfg, fills in defaults and returns a Scanner. It
// reports every bad field at once.
func NewScanner(cfg ScannerConfig) (*Scanner, error) {
	var errs []error
	if cfg.Index == nil {
		errs = append(errs, errors.New("unacked: scanner needs an Index"))
	}
	if cfg.Interval < 0 {
		errs = append(errs, fmt.Errorf("unacked: scanner Interval %v is negative", cfg.Interval))
	}
	if cfg.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("unacked: scanner BatchSize %d is negative", cfg.BatchSize))
	}
	if cfg.PassLimit < 0 {
		errs = append(errs, fmt.Errorf("unacked: scanner PassLimit %d is negative", cfg.PassLimit))
	}
	if cfg.DeliveryTimeout < 0 {
		errs = append(errs, fmt.Errorf("unacked: scanner DeliveryTimeout %v is negative", cfg.DeliveryTimeout))
	}
	if (cfg.DeliveryTimeout > 0 || cfg.TimeoutFor != nil) && cfg.TimedOut == nil {
		errs = append(errs, errors.New("unacked: scanner has a DeliveryTimeout or TimeoutFor but no TimedOut"))
	}
	if cfg.Orphaned != nil && cfg.Requeue == nil {
		errs = append(errs, errors.New("unacked: scanner has Orphaned but no Requeue"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Leader == nil {
		cfg.Leader = func() bool { return true }
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultScanInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.PassLimit == 0 {
		cfg.PassLimit = DefaultPassLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scanner{cfg: cfg, reported: make(map[delivery]struct{})}, nil
}

// ScanOnce runs one pass when this node is the leader: every Delivered entry
// that is Orphaned goes to Requeue, in batches; every other Delivered entry
// older than DeliveryTimeout goes to TimedOut, once per delivery. Returned
// entries are left alone: they already wait in their queue. Requeue and
// TimedOut run after the index scan, not inside it.
func (s *Scanner) ScanOnce(ctx context.Context) error {
	s.passMu.Lock()
	defer s.passMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.cfg.Leader() {
		// A new leader reports afresh; if we lead again, so do we.
		clear(s.reported)
		return nil
	}

	now := s.cfg.Now()
	timeout := s.cfg.DeliveryTimeout
	var orphans, timedOut []Entry
	// still collects the earlier reports seen again in this pass.
	still := make(map[delivery]struct{}, len(s.reported))
	complete := true
	err := s.cfg.Index.Scan(ctx, func(e Entry) bool {
		if e.State != Delivered {
			return true
		}
		orphaned := s.cfg.Orphaned != nil && s.cfg.Orphaned(e)
		limit := timeout
		if !orphaned && s.cfg.TimeoutFor != nil {
			limit = s.cfg.TimeoutFor(e)
		}
		switch {
		case orphaned:
			orphans = append(orphans, e)
		case limit > 0 && now.Sub(time.Unix(0, e.DeliveredAt)) > limit:
			d := deliveryOf(&e)
			if _, done := s.reported[d]; done {
				still[d] = struct{}{}
				return true
			}
			timedOut = append(timedOut, e)
		default:
			return true
		}
		if len(orphans)+len(timedOut) >= s.cfg.PassLimit {
			complete = false
			return false
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("unacked: scan: %w", err)
	}
	if complete {
		// Reports of deliveries no longer in the index are dropped here;
		// that is what keeps the set bounded.
		s.reported = still
	}

	for len(orphans) > 0 {
		n := min(len(orphans), s.cfg.BatchSize)
		s.cfg.Requeue(ctx, orphans[:n:n])
		orphans = orphans[n:]
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	for i := range timedOut {
		s.cfg.TimedOut(ctx, timedOut[i])
		s.reported[deliveryOf(&timedOut[i])] = struct{}{}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Run makes a pass at once, then one every Interval, until ctx is done.
// Failed passes are logged and retried at the next tick. The caller starts
// Run on its own goroutine and stops it by canceling ctx; Run returns once
// the pass in progress, if any, has finished.
func (s *Scanner) Run(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		if err := s.ScanOnce(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("unacked: scan failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
