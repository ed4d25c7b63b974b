package session

import (
	"sync"
	"sync/atomic"
)

// Drain is the broker's graceful-shutdown state that connections obey
// (Config.Drain). Once started, nothing new enters or leaves the queues
// through a connection while what is already out finishes:
//
//   - a publish (basic.publish on the wire, Handle on a direct connection)
//     closes its connection with 320 CONNECTION_FORCED, the code RabbitMQ
//     closes every client connection with when the node shuts down, so a
//     publisher reconnects elsewhere; the refused message was never
//     confirmed, and nothing confirmed before is touched;
//   - consumers get no new deliveries (consumer.HasRoom says no, so the
//     queue keeps the messages ready) and basic.get answers get-empty, but
//     acks, nacks and rejects of what they hold work as before, so a
//     consumer-only connection finishes its work undisturbed.
//
// Outstanding tells the broker when that work is done. A Drain is never
// stopped: the broker closes next.
type Drain struct {
	on      atomic.Bool
	mu      sync.Mutex
	started chan struct{} // closed by Start; made on first use
}

// Start starts draining. Safe from any goroutine, any number of times.
func (d *Drain) Start() {
	d.on.Store(true)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started == nil {
		d.started = make(chan struct{})
	}
	select {
	case <-d.started:
	default:
		close(d.started)
	}
}

// Started returns a channel closed once Start was called, for whoever
// must act only after publishes are refused.
func (d *Drain) Started() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started == nil {
		d.started = make(chan struct{})
	}
	return d.started
}

// On reports whether Start was called; false on a nil Drain.
func (d *Drain) On() bool { return d != nil && d.on.Load() }

// drainText is the reply text of a publish refused while draining.
const drainText = "broker shutting down: publishes are refused"

// Outstanding counts what the connection still has in flight: deliveries
// not yet acked, nacked or rejected, and publishes not yet confirmed. Safe
// from any goroutine.
func (c *Conn) Outstanding() int {
	t := c.tracker()
	t.mu.Lock()
	states := make([]*channelState, 0, len(t.channels))
	for _, s := range t.channels {
		states = append(states, s)
	}
	t.mu.Unlock()
	n := 0
	for _, s := range states {
		d := &s.ch.dl
		d.Lock()
		n += d.unacked.Len()
		d.Unlock()
		if conf := s.confirm.Load(); conf != nil {
			conf.mu.Lock()
			n += int(conf.next - conf.answered)
			conf.mu.Unlock()
		}
	}
	return n
}
