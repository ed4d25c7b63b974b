package brokertest

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/faultstore"
	"github.com/warrenmq/broker/internal/testhook"
)

// ConnectionForced is AMQP's 320 CONNECTION_FORCED, the code RabbitMQ's
// management API closes a connection with.
const ConnectionForced = 320

// ManagementCloseReason is the reason RabbitMQ's management API (3.x and
// 4.x) gives a connection it closes when the request names none; clients
// see "CONNECTION_FORCED - Closed via management plugin".
const ManagementCloseReason = "Closed via management plugin"

// ConnectionName returns the client-provided name of a connection
// (amqp091.Table.SetClientConnectionName), or "".
func ConnectionName(c broker.ConnectionInfo) string {
	s, _ := c.ClientProperties["connection_name"].(string)
	return s
}

// CloseConnections closes every connection of the running broker whose
// client-provided name is name, with code and text (use ConnectionForced
// and ManagementCloseReason to do what RabbitMQ's management API does).
// It returns how many it closed.
func (l *Lab) CloseConnections(name string, code uint16, text string) (int, error) {
	return l.CloseConnectionsWhere(func(c broker.ConnectionInfo) bool { return ConnectionName(c) == name }, code, text)
}

// CloseConnectionsWhere closes every connection for which match holds,
// with code and text, and returns how many it closed. The clients see
// connection.close at once; the broker closes the socket once they answer
// or the close timeout passes.
func (l *Lab) CloseConnectionsWhere(match func(broker.ConnectionInfo) bool, code uint16, text string) (int, error) {
	b, _ := l.current()
	if b == nil {
		return 0, errors.New("brokertest: no broker running")
	}
	n := 0
	for _, c := range b.Connections() {
		if !match(c) {
			continue
		}
		if err := b.CloseConnection(c.ID, code, text); err != nil {
			if errors.Is(err, broker.ErrNotFound) {
				continue // it closed meanwhile
			}
			return n, err
		}
		n++
	}
	return n, nil
}

// ForceConsumerTimeout closes channel ch of the connection named name as
// the consumer timeout would now (406 PRECONDITION_FAILED, "delivery
// acknowledgement on channel N timed out..."): what it held goes back to
// its queues, redelivered.
func (l *Lab) ForceConsumerTimeout(name string, ch uint16) error {
	b, _ := l.current()
	if b == nil {
		return errors.New("brokertest: no broker running")
	}
	for _, c := range b.Connections() {
		if ConnectionName(c) == name {
			return testhook.ForceConsumerTimeout(b, c.ID, ch)
		}
	}
	return fmt.Errorf("%w: connection named %q", broker.ErrNotFound, name)
}

// RaiseAlarm raises a memory or disk alarm on the running broker:
// publishing connections are blocked (connection.blocked) until
// ClearAlarm, as when RabbitMQ's watermark is crossed. It stays raised
// until cleared, whatever the monitor measures, and ends with a restart.
func (l *Lab) RaiseAlarm(kind broker.Alarm) {
	if b, _ := l.current(); b != nil {
		b.RaiseAlarm(kind)
	}
}

// ClearAlarm clears an alarm RaiseAlarm raised.
func (l *Lab) ClearAlarm(kind broker.Alarm) {
	if b, _ := l.current(); b != nil {
		b.ClearAlarm(kind)
	}
}

// StoreOp names a store call the store faults can break; the ones that
// matter to clients are StoreAppend (storing published messages) and
// StoreAck (deleting acknowledged ones).
type StoreOp = faultstore.Op

// The store calls most worth breaking.
const (
	// StoreAppend stores published messages: failing it nacks them.
	StoreAppend = faultstore.Append
	// StoreSync makes earlier writes durable on stores that sync, for
	// the callers that ask for it separately (a definitions import, a
	// shared-mode vhost following the others). A persistent publish is
	// made durable inside its append, so failing StoreSync nacks no
	// publish: to fail a publish's write or sync, fail StoreAppend.
	StoreSync = faultstore.Sync
	// StoreAck deletes acknowledged messages.
	StoreAck = faultstore.DeleteByOffsets
	// StoreCursor moves a queue's cursor (a delivery's claim).
	StoreCursor = faultstore.CompareAndSwapOffset
	// StoreIndexPut records deliveries in the unacked index.
	StoreIndexPut = faultstore.IndexPut
)

// ErrDiskFull is the error DiskFull makes the stores return, wrapping
// syscall.ENOSPC as a full disk's write does.
var ErrDiskFull = fmt.Errorf("brokertest: disk full: %w", syscall.ENOSPC)

// FailAppends makes the next n appends of published messages fail, as a
// disk error would: the publishers in confirm mode get basic.nack for the
// messages of those appends (RabbitMQ nacks what it could not store), and
// nothing is lost that was acked. n <= 0 fails every append until
// ClearStoreFaults.
func (l *Lab) FailAppends(n int) {
	l.FailStore(StoreAppend, n, nil)
}

// FailStore makes the next n calls of op fail with err (an injected
// error when nil); n <= 0 fails every one until ClearStoreFaults.
func (l *Lab) FailStore(op StoreOp, n int, err error) {
	l.inj.Fail(faultstore.On(op), n, err)
}

// DiskFull fills the disk: the disk alarm is raised (publishers are
// blocked, as by RabbitMQ's disk_free_limit) and every write to the
// stores fails with ErrDiskFull, so a publish already past the alarm is
// nacked. DiskFreed undoes it.
func (l *Lab) DiskFull() {
	l.RaiseAlarm(broker.AlarmDisk)
	l.inj.Fail(faultstore.On(faultstore.Append, faultstore.Sync, faultstore.IndexPut, faultstore.CompareAndSwapOffset), 0, ErrDiskFull)
}

// DiskFreed ends DiskFull: the stores take writes again and the disk
// alarm is cleared.
func (l *Lab) DiskFreed() {
	l.ClearStoreFaults()
	l.ClearAlarm(broker.AlarmDisk)
}

// ClearStoreFaults removes every store fault (FailAppends, FailStore,
// DiskFull) and releases every hung call.
func (l *Lab) ClearStoreFaults() {
	l.inj.Clear()
}

// Hang holds one store call until Release.
type Hang struct {
	rule *faultstore.Rule
}

// HangStore makes the next call of op wait, before it reaches the store,
// until the Hang's Release: a stalled disk. Use Arrived to know the call
// is held.
func (l *Lab) HangStore(op StoreOp) *Hang {
	return &Hang{rule: l.inj.Block(faultstore.On(op))}
}

// Arrived is closed once a call is being held.
func (h *Hang) Arrived() <-chan struct{} { return h.rule.Fired() }

// Release lets the held call (and any later one) go on. Calling it more
// than once is harmless.
func (h *Hang) Release() { h.rule.Release() }

// QueueState is what WaitQueue compares: a queue's ready and unacked
// message counts and its consumers.
type QueueState struct {
	Ready, Unacked uint64
	Consumers      int
}

// WaitQueue waits until the queue name of vhost "/" satisfies cond, or
// ctx ends; it returns the last state seen. The queue not existing (yet)
// counts as not satisfied. It asks the broker at short, growing intervals
// (50 µs to 5 ms), so a test needs no sleep of its own.
func (l *Lab) WaitQueue(ctx context.Context, name string, cond func(QueueState) bool) (QueueState, error) {
	return WaitQueue(ctx, l.Broker, "/", name, cond)
}

// WaitQueue waits until the queue vhost/name of the broker current
// returns satisfies cond, or ctx ends (with ctx's error and the last
// state seen). current is asked each time, so it can follow a Lab's
// restarts (pass lab.Broker) or stay on one broker (func() *broker.Broker
// { return b }).
func WaitQueue(ctx context.Context, current func() *broker.Broker, vhost, name string, cond func(QueueState) bool) (QueueState, error) {
	backoff := 50 * time.Microsecond
	var last QueueState
	for {
		if b := current(); b != nil {
			for _, q := range b.Stats().QueueDetails {
				if q.VHost == vhost && q.Name == name {
					last = QueueState{Ready: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers}
					if cond(last) {
						return last, nil
					}
				}
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, fmt.Errorf("brokertest: queue %q: %w (last seen: %+v)", name, ctx.Err(), last)
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Millisecond)
	}
}

// Ready is a WaitQueue condition: exactly n ready messages.
func Ready(n uint64) func(QueueState) bool {
	return func(s QueueState) bool { return s.Ready == n }
}

// Unacked is a WaitQueue condition: exactly n unacknowledged deliveries.
func Unacked(n uint64) func(QueueState) bool {
	return func(s QueueState) bool { return s.Unacked == n }
}

// Consumers is a WaitQueue condition: exactly n consumers.
func Consumers(n int) func(QueueState) bool {
	return func(s QueueState) bool { return s.Consumers == n }
}
