package broker

import (
	"context"
	"time"

	"github.com/warrenmq/broker/internal/scan"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/unacked"
)

// The unacked scanner (internal/scan) returns orphaned deliveries and
// enforces the consumer timeout; the broker starts it last in New, with
// the requeue and the timeout's verdicts below and in consumer_timeout.go.

// startScanner starts the scanner goroutine; New calls it last.
func (b *Broker) startScanner() error {
	t := &scan.Timeouts{
		Node: b.nodeID, Incarnation: b.incarnation, VHost: b.lookupVHost,
		ClassicTimeout: b.opts.profile().ClassicConsumerTimeout,
		QuorumCancel:   b.opts.profile().QuorumConsumerTimeoutCancel,
		Log:            b.log,
	}
	c := scan.Config{
		Indexes:     []unacked.Index{b.stores.Durable.Index, b.stores.Transient.Index},
		Leader:      b.stores.Meta.IsLeader,
		Shared:      b.shared(),
		Node:        b.nodeID,
		Incarnation: b.incarnation,
		PeerAlive:   b.opts.peers.Alive,
		Conns:       b.liveConnections,
		Requeue:     b.requeueEntries,
		// Per-queue and per-consumer timeouts apply even when the
		// broker-wide one is off (scan.Timeouts).
		TimeoutFor: t.For,
		TimedOut:   t.TimedOut,
		Every:      b.opts.ScanInterval,
		Timeout:    b.opts.ConsumerTimeout,
		Logger:     b.log,
	}
	if b.opts.Clock != nil {
		c.Now = b.opts.Clock.Now
	}
	s, err := scan.New(c)
	if err != nil {
		return err
	}
	b.scan = s
	t.Scanner = s
	s.Start()
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
	if b.scan != nil {
		b.scan.SetTimeout(d)
	}
}

// stopScanner stops the scanner, when it started.
func (b *Broker) stopScanner() {
	if b.scan != nil {
		b.scan.Stop()
	}
}

// liveConnections maps the id of every live connection to it.
func (b *Broker) liveConnections() map[string]*session.Conn { return b.conns.ByID() }

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
