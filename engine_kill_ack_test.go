package broker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// A broker killed with SIGKILL while a consumer acks persistent messages
// and a publisher streams more with confirms comes back with every
// confirmed message it did not see acked, the ones that were out
// redelivered and the others not, and with none of the acks it had made
// durable. An ack is applied once a basic.get on the channel that acked
// returns (the queue settles the acks before it, one mailbox, in order)
// and durable once a publish begun after that is confirmed: acks are
// written without a sync, and the sync of any later write covers them.
func TestEngineKill9KeepsAcksAndConfirms(t *testing.T) {
	srv, restart := killableServer(t)
	ctx := context.Background()
	pubConn, err := amqp091.Dial(srv.URL())
	require.NoError(t, err)
	defer pubConn.Close()
	subConn, err := amqp091.Dial(srv.URL())
	require.NoError(t, err)
	defer subConn.Close()
	pub, sub := amqptest.Channel(t, pubConn), amqptest.Channel(t, subConn)
	_, err = pub.QueueDeclare("acks", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, pub.Confirm(false))
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 1024))
	var published atomic.Uint64 // publishes begun
	go func() {
		// Until the kill, at up to a few thousand a second: the
		// consumer keeps up, and a publish is always begun soon after
		// any moment.
		for i := 0; ; i++ {
			if i%4 == 3 {
				time.Sleep(time.Millisecond)
			}
			published.Store(uint64(i + 1))
			err := pub.PublishWithContext(ctx, "", "acks", false, false,
				amqp091.Publishing{Body: fmt.Appendf(nil, "m-%d", i), DeliveryMode: amqp091.Persistent})
			if err != nil {
				return // the broker died under us
			}
		}
	}()
	var mu sync.Mutex
	confirmed := map[string]bool{}
	var highest uint64 // highest tag confirmed
	confirmsDone := make(chan struct{})
	go func() {
		defer close(confirmsDone)
		for c := range confirms { // closed when the connection dies
			mu.Lock()
			if c.Ack {
				confirmed[fmt.Sprintf("m-%d", c.DeliveryTag-1)] = true
			}
			highest = max(highest, c.DeliveryTag)
			mu.Unlock()
		}
	}()
	waitConfirmed := func(tag uint64) {
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return highest >= tag
		}, 10*time.Second, time.Millisecond)
	}

	require.NoError(t, sub.Qos(50, 0, false))
	msgs, err := sub.Consume("acks", "", false, false, false, false, nil)
	require.NoError(t, err)
	acked := map[string]bool{}     // acked durably: must not come back
	delivered := map[string]bool{} // out, not known to be acked durably
	got := map[string]bool{}       // out by basic.get, never acked
	lastRead := -1                 // highest message number the consumer read
	read := func(d amqp091.Delivery) {
		var i int
		_, err := fmt.Sscanf(string(d.Body), "m-%d", &i)
		require.NoError(t, err)
		lastRead = max(lastRead, i)
		delivered[string(d.Body)] = true
	}
	for len(acked) < 1500 {
		d := amqptest.Next(t, msgs)
		read(d)
		require.NoError(t, d.Ack(false))
		if d.DeliveryTag%50 != 0 {
			continue
		}
		g, ok, err := sub.Get("acks", false)
		require.NoError(t, err)
		// The publish begun after the get (the one in progress may
		// have been committed before the acks).
		waitConfirmed(published.Load() + 1)
		for b := range delivered {
			acked[b] = true
		}
		clear(delivered)
		if ok {
			got[string(g.Body)] = true // not acked: stays out
		}
	}

	// Leave some deliveries out, and a few acks not yet durable.
	for i := range 30 {
		d := amqptest.Next(t, msgs)
		read(d)
		if i%2 == 0 {
			require.NoError(t, d.Ack(false)) // may come back or not
		}
	}
	srv.Kill(t)
	<-confirmsDone

	srv2 := restart()
	conn2, err := amqp091.Dial(srv2.URL())
	require.NoError(t, err)
	defer conn2.Close()
	ch2 := amqptest.Channel(t, conn2)
	require.NoError(t, ch2.Qos(500, 0, false))
	q, err := ch2.QueueDeclarePassive("acks", true, false, false, false, nil)
	require.NoError(t, err)
	back, err := ch2.Consume("acks", "", false, false, false, false, nil)
	require.NoError(t, err)
	seen := map[string]bool{}
	for range q.Messages {
		d := amqptest.Next(t, back)
		body := string(d.Body)
		require.False(t, seen[body], "%s twice", body)
		seen[body] = true
		require.False(t, acked[body], "acked message %s came back", body)
		switch {
		case got[body]:
			// Out since before a durable point: its claim survived.
			require.True(t, d.Redelivered, "%s was out at the kill", body)
		case delivered[body]:
			// Out since the last durable point: its claim (index entry
			// and cursor, written without a sync) may have been lost
			// with the kill, and then it was never delivered.
		case d.Redelivered:
			// Sent but not yet read by the test: the consumer's prefetch
			// was in flight, after everything it read (one queue, in
			// order).
			var i int
			_, err := fmt.Sscanf(body, "m-%d", &i)
			require.NoError(t, err)
			require.Greater(t, i, lastRead, "%s redelivered, never delivered", body)
		}
		require.NoError(t, d.Ack(false))
	}
	select {
	case d := <-back:
		t.Fatalf("more messages than the queue counted: %s", d.Body)
	case <-time.After(100 * time.Millisecond):
	}
	mu.Lock()
	defer mu.Unlock()
	for body := range confirmed {
		if !acked[body] && !delivered[body] {
			// (A delivered one may have been acked, not durably.)
			require.True(t, seen[body], "confirmed message %s lost", body)
		}
	}
	t.Logf("acked %d, got %d, read since the last durable point %d, confirmed %d, back %d", len(acked), len(got), len(delivered), len(confirmed), len(seen))
}
