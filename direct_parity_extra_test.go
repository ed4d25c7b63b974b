package broker_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// tcpAndDirect opens channels on a fresh listening broker through
// amqp091-go over TCP, or directly: the doors the scenarios below must not
// tell apart.
var tcpAndDirect = []struct {
	name string
	open func(t *testing.T) func() parityChannel
}{
	{"amqp091 over TCP", func(t *testing.T) func() parityChannel {
		b := startBroker(t, broker.Options{})
		return func() parityChannel {
			return amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		}
	}},
	{"direct", func(t *testing.T) func() parityChannel {
		b := startBroker(t, broker.Options{})
		return func() parityChannel {
			ch, err := b.Channel(t.Context())
			require.NoError(t, err)
			t.Cleanup(func() { _ = ch.Close() })
			return ch
		}
	}},
}

// requireSameTranscript runs scenario through each door and requires the
// same transcript from both.
func requireSameTranscript(t *testing.T, scenario func(t *testing.T, tr *parityTranscript, open func() parityChannel)) {
	t.Helper()
	results := make([][]string, len(tcpAndDirect))
	for i, door := range tcpAndDirect {
		t.Run(door.name, func(t *testing.T) {
			tr := &parityTranscript{t: t}
			scenario(t, tr, door.open(t))
			results[i] = tr.lines
		})
	}
	require.NotEmpty(t, results[0])
	require.Equal(t, results[0], results[1])
}

// TestParityDeferredConfirms: sequence numbers, DeferredConfirmations and
// NotifyConfirm as amqp091-go has them, acks and nacks (a full queue with
// x-overflow reject-publish nacks).
func TestParityDeferredConfirms(t *testing.T) {
	requireSameTranscript(t, func(t *testing.T, tr *parityTranscript, open func() parityChannel) {
		ctx := context.Background()
		ch := open()
		_, err := ch.QueueDeclare("capped", false, false, false, false, amqp091.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
		tr.err("queue.declare", err)
		tr.add("next before confirm mode: %d", ch.GetNextPublishSeqNo())
		dc, err := ch.PublishWithDeferredConfirm("", "capped", false, false, amqp091.Publishing{Body: []byte("plain")})
		tr.err("publish outside confirm mode", err)
		tr.add("deferred outside confirm mode: %v", dc)
		tr.add("next, still outside: %d", ch.GetNextPublishSeqNo())
		_, err = ch.QueuePurge("capped", false)
		tr.err("queue.purge", err)

		tr.err("confirm.select", ch.Confirm(false))
		acks, nacks := ch.NotifyConfirm(make(chan uint64, 8), make(chan uint64, 8))
		confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 8))
		var dcs []*amqp091.DeferredConfirmation
		for i := range 3 {
			tr.add("next: %d", ch.GetNextPublishSeqNo())
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "capped", false, false, amqp091.Publishing{Body: []byte{byte('a' + i)}})
			tr.err("publish", err)
			dcs = append(dcs, dc)
		}
		tr.err("publish without deferred", ch.Publish("", "capped", false, false, amqp091.Publishing{Body: []byte("d")}))
		tr.add("next after four: %d", ch.GetNextPublishSeqNo())
		for _, dc := range dcs {
			acked, err := dc.WaitContext(ctx)
			tr.err("wait", err)
			tr.add("deferred %d: acked %t, Acked() %t", dc.DeliveryTag, acked, dc.Acked())
		}
		for range 4 {
			c, _ := amqptest.Receive(t, confirms)
			tr.add("confirmation: %+v", c)
		}
		for _, want := range []string{"ack", "ack", "nack", "nack"} {
			from := acks
			if want == "nack" {
				from = nacks
			}
			tag, _ := amqptest.Receive(t, from)
			tr.add("NotifyConfirm %s: %d", want, tag)
		}
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		dc, err = ch.PublishWithDeferredConfirmWithContext(canceled, "", "capped", false, false, amqp091.Publishing{})
		tr.add("canceled publish: %v %v", dc, err)
		tr.add("next after the canceled one: %d", ch.GetNextPublishSeqNo())
		tr.err("close", ch.Close())
		_, ackOpen := amqptest.Receive(t, acks)
		_, nackOpen := amqptest.Receive(t, nacks)
		tr.add("NotifyConfirm channels open after close: %t %t", ackOpen, nackOpen)

		// One channel for both: closed once.
		ch = open()
		tr.err("confirm.select", ch.Confirm(false))
		both := make(chan uint64, 1)
		a, n := ch.NotifyConfirm(both, both)
		tr.add("same channel returned: %t %t", a == both, n == both)
		tr.err("publish", ch.Publish("", "capped", false, false, amqp091.Publishing{}))
		tag, _ := amqptest.Receive(t, both)
		tr.add("nack on the shared channel: %d", tag)
		tr.err("close", ch.Close())
		_, open1 := amqptest.Receive(t, both)
		tr.add("shared channel open after close: %t", open1)
	})
}

// TestParityFlowAndRecovery: channel.flow (RabbitMQ refuses to pause),
// NotifyFlow, QueueInspect, and the recovery API of a channel without
// Config.Recovery.
func TestParityFlowAndRecovery(t *testing.T) {
	requireSameTranscript(t, func(t *testing.T, tr *parityTranscript, open func() parityChannel) {
		ch := open()
		flows := ch.NotifyFlow(make(chan bool, 1))
		tr.err("flow active", ch.Flow(true))
		_, err := ch.QueueDeclare("inspected", false, false, false, false, nil)
		tr.err("queue.declare", err)
		tr.err("publish", ch.Publish("", "inspected", false, false, amqp091.Publishing{Body: []byte("x")}))
		_, err = ch.QueueDeclarePassive("inspected", false, false, false, false, nil) // a round trip: the publish is in
		tr.err("queue.declare passive", err)
		q, err := ch.QueueInspect("inspected")
		tr.err("queue inspect", err)
		tr.add("queue: %+v", q)
		tr.add("reconnect: %v", ch.Reconnect())
		for _, global := range []bool{false, true} {
			tc := ch.TopologyConfiguration(global)
			tr.add("topology (global %t): %#v", global, tc)
		}
		tr.err("close", ch.Close())
		_, open1 := amqptest.Receive(t, flows)
		tr.add("flow listener open after close: %t", open1)
		tr.add("flow listener registered after close open: %t", isOpen(ch.NotifyFlow(make(chan bool))))

		ch = open()
		q, err = ch.QueueInspect("missing")
		tr.err("queue inspect of a missing queue", err)
		tr.add("queue: %+v", q)

		ch = open()
		tr.err("flow paused", ch.Flow(false))
		tr.add("closed after flow paused: %t", ch.IsClosed())
	})
}

// TestParityStateChanges: NotifyStateChange and NotifyRecoveryCancel on a
// graceful close and on a close by the broker.
func TestParityStateChanges(t *testing.T) {
	requireSameTranscript(t, func(t *testing.T, tr *parityTranscript, open func() parityChannel) {
		ch := open()
		states := make(chan *amqp091.StateChanged, 4)
		ch.NotifyStateChange(states)
		ch.NotifyStateChange(states) // twice: still told once
		ch.NotifyStateChange(nil)
		cancels := ch.NotifyRecoveryCancel(make(chan struct{}))
		tr.err("close", ch.Close())
		_, open1 := amqptest.Receive(t, cancels)
		tr.add("recovery cancel open after close: %t", open1)
		recordStates(t, tr, states)
		tr.add("recovery cancel registered after close open: %t", isOpen(ch.NotifyRecoveryCancel(make(chan struct{}))))
		late := make(chan *amqp091.StateChanged, 1)
		ch.NotifyStateChange(late)
		_, open1 = amqptest.Receive(t, late)
		tr.add("state listener registered after close open: %t", open1)

		ch = open()
		states = make(chan *amqp091.StateChanged, 4)
		ch.NotifyStateChange(states)
		_, err := ch.QueueDeclarePassive("missing", false, false, false, false, nil)
		tr.err("passive declare of a missing queue", err)
		recordStates(t, tr, states)
	})
}

// recordStates writes down the transitions until states is closed.
func recordStates(t *testing.T, tr *parityTranscript, states <-chan *amqp091.StateChanged) {
	t.Helper()
	for {
		sc, ok := amqptest.Receive(t, states)
		if !ok {
			tr.add("state listener closed")
			return
		}
		var ae *amqp091.Error
		if errors.As(sc.Err, &ae) {
			tr.add("state %s -> %s: %d %s", sc.From, sc.To, ae.Code, ae.Reason)
		} else {
			tr.add("state %s -> %s: %v", sc.From, sc.To, sc.Err)
		}
	}
}

// isOpen reports whether nothing has closed c yet.
func isOpen[T any](c chan T) bool {
	select {
	case _, ok := <-c:
		return ok
	default:
		return true
	}
}

// TestDirectDeferredConfirmsConcurrent: publishes from many goroutines
// each get their own sequence number, and each DeferredConfirmation is
// the confirm of its own publish (every message names its tag, and a
// consumer sees each once).
func TestDirectDeferredConfirmsConcurrent(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ch, err := b.Channel(t.Context())
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDeclare("many", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	const workers, each = 8, 50
	var mu sync.Mutex
	tags := map[uint64]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				dc, err := ch.PublishWithDeferredConfirm("", "many", false, false, amqp091.Publishing{})
				if !assert(t, err == nil && dc != nil, "publish: %v", err) {
					return
				}
				mu.Lock()
				dup := tags[dc.DeliveryTag]
				tags[dc.DeliveryTag] = true
				mu.Unlock()
				assert(t, !dup, "tag %d handed out twice", dc.DeliveryTag)
				assert(t, dc.Wait(), "publish %d nacked", dc.DeliveryTag)
			}
		})
	}
	wg.Wait()
	require.Len(t, tags, workers*each)
	for tag := uint64(1); tag <= workers*each; tag++ {
		require.True(t, tags[tag], "tag %d", tag)
	}
	require.Equal(t, uint64(workers*each+1), ch.GetNextPublishSeqNo())
}

// assert reports a failure from any goroutine (t.Errorf, not t.Fatal) and
// returns ok.
func assert(t *testing.T, ok bool, format string, args ...any) bool {
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

// TestDirectDeferredConfirmClosed: a DeferredConfirmation still waiting
// when the channel closes is done, not acked, as amqp091-go's are.
func TestDirectDeferredConfirmClosed(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{})
	ch := brokertest.Channel(t, lab.Broker())
	_, err := ch.QueueDeclare("slow", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	hang := lab.HangStore(brokertest.StoreAppend)
	defer hang.Release()
	dc, err := ch.PublishWithDeferredConfirm("", "slow", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent})
	require.NoError(t, err)
	amqptest.Receive(t, hang.Arrived())
	require.False(t, dc.Acked())
	select {
	case <-dc.Done():
		t.Fatal("done before its confirm")
	default:
	}
	require.NoError(t, ch.Close())
	_, open := amqptest.Receive(t, dc.Done())
	require.False(t, open)
	require.False(t, dc.Wait())
	require.False(t, dc.Acked())
}
