package session

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/storage"
)

// The confirm window answers finished publishes in order: consecutive acks
// coalesce into one multiple=true ack, a failed publish gets its own nack,
// and nothing is answered past a publish still waiting for a queue.
func TestConfirmsAnswerInOrder(t *testing.T) {
	failed := errors.New("store failed")
	type step struct {
		publish int      // publish one message routed to this many queues...
		stored  []uint64 // ...or: these seqs were stored by one queue
		err     error
		want    []amqp.Method
	}
	ack := func(tag uint64, multiple bool) amqp.Method {
		return &amqp.BasicAck{DeliveryTag: tag, Multiple: multiple}
	}
	nack := func(tag uint64) amqp.Method { return &amqp.BasicNack{DeliveryTag: tag} }
	// A replicated store's append interrupted by a leader change: it may
	// have been stored, so it must not be nacked.
	unknown := fmt.Errorf("queue: store q: %w", fmt.Errorf("raft: leader changed: %w", storage.ErrOutcomeUnknown))
	closed := &amqp.ConnectionClose{ReplyCode: amqp.InternalError,
		ReplyText: "INTERNAL_ERROR - publish outcome unknown: messages not yet confirmed on this connection may or may not be stored (" + unknown.Error() + ")"}
	tests := []struct {
		name  string
		steps []step
	}{
		{"in order, coalesced", []step{
			{publish: 1}, {publish: 1}, {publish: 1},
			{stored: []uint64{1, 2, 3}, want: []amqp.Method{ack(3, true)}},
		}},
		{"a gap holds later ones back", []step{
			{publish: 1}, {publish: 1}, {publish: 1},
			{stored: []uint64{2, 3}},
			{stored: []uint64{1}, want: []amqp.Method{ack(3, true)}},
		}},
		{"two queues: both must store", []step{
			{publish: 2},
			{stored: []uint64{1}},
			{stored: []uint64{1}, want: []amqp.Method{ack(1, false)}},
		}},
		{"nack in the middle", []step{
			{publish: 1}, {publish: 1}, {publish: 1}, {publish: 1},
			{stored: []uint64{1, 2}, want: []amqp.Method{ack(2, true)}},
			{stored: []uint64{4}},
			{stored: []uint64{3}, err: failed, want: []amqp.Method{nack(3), ack(4, false)}},
		}},
		{"one failed queue of two nacks", []step{
			{publish: 2},
			{stored: []uint64{1}, err: failed},
			{stored: []uint64{1}, want: []amqp.Method{nack(1)}},
		}},
		{"unroutable answered at once", []step{
			{publish: 0},
			{stored: []uint64{1}, want: []amqp.Method{ack(1, false)}},
		}},
		{"unknown outcome: no nack, the connection closes", []step{
			{publish: 1}, {publish: 1}, {publish: 1},
			{stored: []uint64{1}, want: []amqp.Method{ack(1, false)}},
			{stored: []uint64{2}, err: unknown, want: []amqp.Method{closed}},
			// Nothing after it is answered either: the publisher must
			// treat everything unconfirmed alike.
			{stored: []uint64{3}},
		}},
		{"unknown outcome on one queue of two", []step{
			{publish: 2},
			{stored: []uint64{1}},
			{stored: []uint64{1}, err: unknown, want: []amqp.Method{closed}},
		}},
		{"unknown seqs are ignored", []step{
			{publish: 1},
			{stored: []uint64{0, 7}},
			{stored: []uint64{1}, want: []amqp.Method{ack(1, false)}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newOpenConn(t)
			ch := newChannel(c, 1)
			conf := newConfirms(ch)
			for _, s := range tc.steps {
				if s.stored == nil {
					conf.publish(s.publish)
					continue
				}
				conf.Confirm(s.stored, s.err)
				require.Equal(t, s.want, takeMethods(t, c))
			}
		})
	}
}

// The window reclaims answered entries: a long run that never catches up
// (500 publishes always outstanding) keeps it small.
func TestConfirmsWindowStaysSmall(t *testing.T) {
	c := newOpenConn(t)
	conf := newConfirms(newChannel(c, 1))
	const lag, n = 500, 100000
	for seq := uint64(1); seq <= n; seq++ {
		conf.publish(1)
		if seq > lag {
			conf.Confirm([]uint64{seq - lag}, nil)
		}
		if seq%1000 == 0 {
			takeOut(t, c)
		}
	}
	require.LessOrEqual(t, cap(conf.window), 4096)
	require.EqualValues(t, n-lag, conf.answered)
	require.Equal(t, lag, len(conf.window)-conf.head)
}

// TestConfirmsWrittenInPlace: over TCP a queue's Confirm writes its ack
// itself (flushQueued) when the writer is idle: the ack is on the wire
// when Confirm returns, and the writer's turn is given back.
func TestConfirmsWrittenInPlace(t *testing.T) {
	p := startTCPPeer(t, testConfig())
	p.Handshake()
	c := p.conn
	c.out.Lock()
	c.waitFlushedLocked()                       // open-ok is out
	c.out.lastWrite = sinceStart() - busyWindow // idle since
	c.out.Unlock()
	conf := newConfirms(newChannel(c, 1))
	conf.publish(1)
	conf.publish(1)
	sent := c.tr.Stats().Sent
	conf.Confirm([]uint64{1, 2}, nil)
	want := amqp.AppendMethodFrame(nil, 1, &amqp.BasicAck{DeliveryTag: 2, Multiple: true})
	require.Equal(t, sent+uint64(len(want)), c.tr.Stats().Sent, "written by Confirm itself")
	c.out.Lock()
	require.False(t, c.out.flushing)
	require.Empty(t, c.out.buf)
	c.out.Unlock()
	f := p.ReadFrame()
	m, err := amqp.DecodeMethod(f.Payload)
	require.NoError(t, err)
	require.Equal(t, &amqp.BasicAck{DeliveryTag: 2, Multiple: true}, m)
}
