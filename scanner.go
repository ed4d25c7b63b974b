package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/unacked"
)

// scanState is the broker's unacked scanner: one goroutine, started by New
// and stopped by Close, that runs a pass of unacked.Scanner over each
// unacked index (the persistent one of durable queues and the in-memory
// one of the others) every scan interval, while meta.Store.IsLeader (in
// shared mode on every broker, see startScanner).
//
// A pass requeues the deliveries whose owner is gone (Orphaned: another
// broker or an earlier run of this one delivered them, or their connection
// is not live) through each queue's RequeueEntries, the one requeue
// primitive, and closes the channel of every delivery held longer than
// Options.ConsumerTimeout with 406 PRECONDITION_FAILED, as RabbitMQ's
// consumer timeout does; closing the channel requeues what it held.
type scanState struct {
	cancel   context.CancelFunc
	done     chan struct{}
	scanners []*unacked.Scanner // one per unacked index
	// timeout is the broker-wide consumer timeout in force, in
	// nanoseconds (<= 0: off): Options.ConsumerTimeout, then
	// SetConsumerTimeout's. retune hands the scanner goroutine the pass
	// interval a new timeout needs (scanInterval).
	timeout atomic.Int64
	retune  chan time.Duration
	// mu is held for a whole pass, so passes (the goroutine's, a test's)
	// never overlap; it guards live, the pass's snapshot of connections.
	mu   sync.Mutex
	live map[string]*session.Conn
}

// scanInterval is how often the scanner runs: every 5 s (or every
// Options.ScanInterval, set), or twice per consumer timeout when that is
// shorter, so a timeout is enforced at most half a timeout late.
func scanInterval(set, timeout time.Duration) time.Duration {
	interval := unacked.DefaultScanInterval
	if set > 0 {
		interval = set
	}
	if timeout > 0 {
		interval = min(interval, max(timeout/2, 10*time.Millisecond))
	}
	return interval
}

// startScanner starts the scanner goroutine; New calls it last.
func (b *Broker) startScanner() error {
	timeout := b.opts.ConsumerTimeout
	if timeout < 0 {
		timeout = 0 // disabled
	}
	b.scan.timeout.Store(int64(b.opts.ConsumerTimeout))
	b.scan.retune = make(chan time.Duration, 1)
	indexes := []unacked.Index{b.stores.Durable.Index, b.stores.Transient.Index}
	b.scan.scanners = make([]*unacked.Scanner, 0, len(indexes))
	leader := b.stores.Meta.IsLeader
	if b.shared() {
		// Every broker enforces the consumer timeout and returns the
		// deliveries of its own earlier runs and dead connections; only
		// the meta leader judges other brokers' (see orphaned).
		leader = func() bool { return true }
	}
	for _, x := range indexes {
		cfg := unacked.ScannerConfig{
			Index:    x,
			Leader:   leader,
			Orphaned: b.orphaned,
			Requeue:  b.requeueEntries,
			Logger:   b.log,
		}
		if b.opts.Clock != nil {
			// Deliveries are stamped with the queues' clock: the
			// timeout must be measured with the same one, or a fake
			// clock makes every delivery look years old (or new).
			cfg.Now = b.opts.Clock.Now
		}
		// Per-queue and per-consumer timeouts apply even when the
		// broker-wide one is off (consumer_timeout.go).
		cfg.TimeoutFor = b.consumerTimeout
		cfg.TimedOut = func(ctx context.Context, e unacked.Entry) { b.deliveryTimedOut(ctx, x, e) }
		s, err := unacked.NewScanner(cfg)
		if err != nil {
			return fmt.Errorf("broker: scanner: %w", err)
		}
		b.scan.scanners = append(b.scan.scanners, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.scan.cancel = cancel
	b.scan.done = make(chan struct{})
	go b.runScanner(ctx, scanInterval(b.opts.ScanInterval, timeout))
	return nil
}

// SetConsumerTimeout changes the broker-wide consumer timeout of a
// running broker, with Options.ConsumerTimeout's meaning (0:
// DefaultConsumerTimeout, negative: off). Deliveries already held are
// judged by the new value at the scanner's next pass, which comes at
// most half the new timeout later (the pass interval follows it);
// queues' and consumers' own x-consumer-timeout and policies keep their
// precedence.
func (b *Broker) SetConsumerTimeout(d time.Duration) {
	if d == 0 {
		d = DefaultConsumerTimeout
	}
	b.scan.timeout.Store(int64(d))
	if b.scan.retune == nil {
		return // no scanner (New failed before it)
	}
	interval := scanInterval(b.opts.ScanInterval, max(d, 0))
	for {
		select {
		case b.scan.retune <- interval:
			return
		default:
		}
		// Replace a retune the scanner has not taken yet: the newest
		// timeout wins.
		select {
		case <-b.scan.retune:
		default:
		}
	}
}

// stopScanner stops the scanner and waits for its pass to finish. Safe to
// call when it never started.
func (b *Broker) stopScanner() {
	if b.scan.cancel == nil {
		return
	}
	b.scan.cancel()
	<-b.scan.done
}

func (b *Broker) runScanner(ctx context.Context, interval time.Duration) {
	defer close(b.scan.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case interval := <-b.scan.retune:
			tick.Reset(interval)
			continue
		case <-tick.C:
		}
		if err := b.scanPass(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("broker: unacked scan failed", "err", err)
		}
	}
}

// scanPass runs one pass over every unacked index.
func (b *Broker) scanPass(ctx context.Context) error {
	b.scan.mu.Lock()
	defer b.scan.mu.Unlock()
	b.scan.live = b.liveConnections()
	defer func() { b.scan.live = nil }()
	var errs []error
	for _, s := range b.scan.scanners {
		if err := s.ScanOnce(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// liveConnections maps the id of every live connection to it.
func (b *Broker) liveConnections() map[string]*session.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	live := make(map[string]*session.Conn, len(b.mu.conns))
	for c := range b.mu.conns {
		live[c.ID()] = c
	}
	return live
}

// connection finds a live connection by id: in the pass's snapshot, else
// (it may have connected since) among the current ones. Called during a
// pass only (scan.mu held).
func (b *Broker) connection(id string) *session.Conn {
	if c, ok := b.scan.live[id]; ok {
		return c
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.mu.conns {
		if c.ID() == id {
			return c
		}
	}
	return nil
}

// orphaned reports whether nobody will ever settle the delivery e: it was
// made by an earlier run of this broker, or its connection is gone, or
// another broker made it and that broker is gone. Without shared mode
// another broker's entry is orphaned (the stores were another broker's
// before); in shared mode only on the meta leader, once Options.PeerAlive
// says that broker is dead. A connection that died after the pass's snapshot still counts as
// live; the next pass catches it.
func (b *Broker) orphaned(e unacked.Entry) bool {
	if e.Broker != b.nodeID {
		if !b.shared() {
			return true
		}
		return b.stores.Meta.IsLeader() && b.opts.PeerAlive != nil && !b.opts.PeerAlive(e.Broker)
	}
	if e.Incarnation != b.incarnation {
		return true
	}
	return b.connection(e.Connection) == nil
}

// requeueEntries hands orphaned deliveries to their queues' requeue
// primitive, one call per queue. A queue ignores an entry whose delivery it
// no longer holds for that owner (settled or requeued meanwhile), so racing
// with the owner's own close is harmless.
func (b *Broker) requeueEntries(ctx context.Context, entries []unacked.Entry) {
	type queueKey struct{ vhost, name string }
	groups := make(map[queueKey][]unacked.Entry)
	for _, e := range entries {
		k := queueKey{canonicalVHost(e.VHost), e.Queue}
		groups[k] = append(groups[k], e)
	}
	for k, es := range groups {
		vh, ok := b.lookupVHost(k.vhost)
		if !ok {
			continue
		}
		q, err := vh.Queue(es[0].Connection, k.name)
		if err != nil {
			continue // the queue is gone, and its entries with it
		}
		if err := q.RequeueEntries(es); err != nil {
			continue
		}
		q.Kick()
		b.log.Info("broker: requeued orphaned deliveries", "vhost", k.vhost, "queue", k.name, "count", len(es))
	}
}
