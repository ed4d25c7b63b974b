package broker

import (
	"context"
	"time"
)

// Shutdown stops the broker gracefully, as net/http's Server.Shutdown does
// a web server: it refuses new work, lets the work in hand finish, then
// closes.
//
//  1. New connections are refused: every listener is closed, and Serve,
//     Listen, Dial and Channel return ErrClosed.
//  2. Publishes are refused on every connection, network and direct: the
//     publishing connection is closed with 320 CONNECTION_FORCED ("broker
//     shutting down"), the code RabbitMQ (4.x) closes client connections
//     with when the node stops, which clients treat as "reconnect
//     elsewhere". The refused message is not confirmed; every message
//     confirmed before is kept. Connections that only consume stay open.
//  3. Consumers get no new deliveries (messages stay ready in their
//     queues, basic.get answers get-empty) while they ack, nack or reject
//     what they hold, and publishers still receive the confirms of what
//     they published before. Shutdown waits until no connection holds an
//     unsettled delivery or an unanswered publish, or until ctx is done.
//     RabbitMQ's own drain (rabbitmq-upgrade drain) closes client
//     connections at once instead; an embedding service rather lets
//     in-flight work finish, like an HTTP server finishing its requests.
//  4. It then calls Close: every connection is closed with 320, every
//     goroutine stopped and the stores closed.
//
// Shutdown returns nil when everything settled, or ctx.Err() when ctx
// ended first (it closes anyway). Either way nothing confirmed is lost:
// deliveries still unacked go back to their queues and, for durable
// queues, come back with redelivered set after a restart, as on Close.
// Shutdown polls the connections, like net/http, starting at 1 ms and
// backing off to 100 ms. Calling Shutdown again, or Close during or after
// it, is safe; each call returns once the broker is closed.
func (b *Broker) Shutdown(ctx context.Context) error {
	select {
	case <-b.closeDone:
		return nil // closed already: nothing to drain
	default:
	}
	// New connections (served, Dial, Channel) and listeners are refused,
	// and the accept loops end with ErrClosed.
	b.conns.Refuse()
	b.drain.Start()
	b.log.Info("broker: shutting down, waiting for consumers to settle their deliveries")

	b.dispatchBarrier(ctx)
	err := b.waitSettled(ctx)
	if err != nil {
		b.log.Warn("broker: shutdown deadline passed before every delivery was settled; unsettled ones go back to their queues", "err", err, "outstanding", b.outstanding())
	}
	b.Close()
	return err
}

// dispatchBarrier returns once every queue's actor has finished what it
// was doing when the drain started: a delivery that passed its consumer's
// HasRoom just before is then counted by outstanding and settled, not cut
// off by Close. Queues dispatch only on their actor, and Stats runs there
// after every earlier step.
func (b *Broker) dispatchBarrier(ctx context.Context) {
	vhs := b.vhosts.List()
	for _, vh := range vhs {
		for _, q := range vh.Queues() {
			// A deleted queue has nothing to deliver; ctx's end is
			// waitSettled's to report.
			_, _ = q.Stats(ctx)
		}
	}
}

// waitSettled polls until no connection has anything outstanding, or ctx
// is done.
func (b *Broker) waitSettled(ctx context.Context) error {
	wait := time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for b.outstanding() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.closeDone:
			return nil // Close ran meanwhile
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
		t.Reset(wait)
	}
	return nil
}

// outstanding sums the unsettled deliveries and unanswered publishes of
// every connection.
func (b *Broker) outstanding() int {
	n := 0
	for _, c := range b.conns.List() {
		n += c.Outstanding()
	}
	return n
}
