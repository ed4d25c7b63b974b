package broker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/dedup"
	"github.com/warrenmq/broker/internal/direct"
	"github.com/warrenmq/broker/internal/measure"
)

// The caches and holding stores count against the memory alarm
// (heldMemory): what they hold is in mem_used, bounded, and a publisher
// whose messages fill one is blocked as for any other memory.

// dedupKey is the i-th distinct deduplication key of size bytes.
func dedupKey(i, size int) string {
	k := fmt.Sprintf("k%09d", i)
	return k + string(bytes.Repeat([]byte{'x'}, max(size-len(k), 0)))
}

// publishConfirmed publishes msgs on a direct Channel in confirm mode and
// waits for every confirm.
func publishConfirmed(t *testing.T, ch *Channel, exchange, key string, msgs func(i int) amqp091.Publishing, n int) {
	t.Helper()
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	for i := range n {
		require.NoError(t, ch.PublishWithContext(context.Background(), exchange, key, false, false, msgs(i)))
	}
	for range n {
		c, ok := amqptest.Receive(t, confirms)
		require.True(t, ok)
		require.True(t, c.Ack)
	}
}

// withKey is a publishing carrying the i-th deduplication key.
func withKey(size int) func(i int) amqp091.Publishing {
	return func(i int) amqp091.Publishing {
		return amqp091.Publishing{Headers: amqp091.Table{"x-deduplication-header": dedupKey(i, size)}}
	}
}

// TestAlarmCountsDedupCache: an x-message-deduplication exchange's cache
// in memory, fed distinct 1 KiB keys, is in the memory alarm's measure,
// within a quarter of what it holds in the heap. It was not: 200,000 such
// keys took the process from 71 to 919 MB while mem_used stayed at 15 MB.
func TestAlarmCountsDedupCache(t *testing.T) {
	const n, size = 20_000, 1024
	b := newDirectBroker(t, Options{})
	ch, err := b.Channel(context.Background())
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("dedup", "x-message-deduplication", false, false, false, false,
		amqp091.Table{"x-cache-size": int64(dedup.MaxSize)}))
	before := b.alarmStatus().MemUsed
	base := measure.LiveHeap()
	publishConfirmed(t, ch, "dedup", "", withKey(size), n)
	counted := b.alarmStatus().MemUsed - before
	heap := measure.LiveHeap() - base
	t.Logf("%d keys of %d bytes: mem_used +%d KiB, live heap +%d KiB", n, size, counted>>10, heap>>10)
	require.GreaterOrEqual(t, counted, int64(n*size))
	require.InDelta(t, float64(heap), float64(counted), float64(heap)/4)
	require.Equal(t, b.held.Dedup.MemoryBytes(), counted)

	require.NoError(t, ch.ExchangeDelete("dedup", false, false))
	require.Zero(t, b.held.Dedup.MemoryBytes(), "a deleted exchange's cache is let go")
}

// TestAlarmDedupBudgetEvicts: the caches in memory hold half the
// watermark at most together. A cache whose x-cache-size would hold ten
// times that evicts its oldest keys at the budget, still drops the
// duplicates of its recent keys, and never raises the alarm by itself.
func TestAlarmDedupBudgetEvicts(t *testing.T) {
	const watermark, n, size = 8 << 20, 20_000, 1024
	b := newDirectBroker(t, Options{MemoryHighWatermark: watermark, alarmPolling: fastAlarms})
	ch, err := b.Channel(context.Background())
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("dedup", "x-message-deduplication", false, false, false, false,
		amqp091.Table{"x-cache-size": int32(1_000_000)}))
	base := measure.LiveHeap()
	publishConfirmed(t, ch, "dedup", "", withKey(size), n)
	heap := measure.LiveHeap() - base
	held := b.held.Dedup.MemoryBytes()
	t.Logf("%d keys of %d bytes, budget %d KiB: the cache holds %d KiB, live heap +%d KiB", n, size, watermark/2>>10, held>>10, heap>>10)
	require.LessOrEqual(t, held, int64(watermark/2+2*size))
	require.Less(t, heap, int64(watermark))
	require.Empty(t, b.Alarms())

	_, err = ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("q", "", "dedup", false, nil))
	last, first := withKey(size)(n-1), withKey(size)(0)
	publishConfirmed(t, ch, "dedup", "", func(int) amqp091.Publishing { return last }, 1)
	require.Zero(t, queueStats(t, b, "q").Ready, "a recent key is still a duplicate")
	publishConfirmed(t, ch, "dedup", "", func(int) amqp091.Publishing { return first }, 1)
	require.EqualValues(t, 1, queueStats(t, b, "q").Ready, "the oldest key was evicted")
	runtime.KeepAlive(ch)
}

// TestAlarmDedupQueueKeysBlockPublishers: the keys of a deduplicating
// durable queue are in memory while its messages are on disk; they count,
// so a publisher filling the queue with distinct keys is blocked at the
// watermark, and consuming the queue lets the keys go and the publisher
// on.
func TestAlarmDedupQueueKeysBlockPublishers(t *testing.T) {
	const watermark = 1 << 20
	b := startBroker(t, Options{DataDir: t.TempDir(), MemoryHighWatermark: watermark, alarmPolling: fastAlarms})
	pub, blocked := dialPublisher(t, b)
	ch, err := pub.Channel() // no cleanup of its own: its close would wait for the blocked reader
	require.NoError(t, err)
	_, err = ch.QueueDeclare("dq", true, false, false, false, amqp091.Table{"x-message-deduplication": true})
	require.NoError(t, err)
	published := 0
	for waiting := true; waiting; {
		msg := withKey(1024)(published)
		msg.DeliveryMode = amqp091.Persistent
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "dq", false, false, msg))
		published++
		require.Less(t, published, 1<<14, "never blocked")
		select {
		case bl := <-blocked:
			require.Equal(t, amqp091.Blocking{Active: true, Reason: "low on memory"}, bl)
			waiting = false
		default:
		}
	}
	require.Greater(t, b.held.DedupKeys.MemoryBytes(), int64(watermark))
	cons := amqptest.Dial(t, b.URL(), amqp091.Config{})
	cch := amqptest.Channel(t, cons)
	msgs, err := cch.Consume("dq", "", true, false, false, false, nil)
	require.NoError(t, err)
	for unblocked := false; !unblocked; {
		select {
		case bl := <-blocked:
			unblocked = !bl.Active
		case <-msgs:
		case <-time.After(amqptest.Timeout):
			t.Fatal("never unblocked")
		}
	}
}

// TestAlarmDelayedMessagesBlockPublishers: delayed messages held in
// memory count, so a publisher filling a delayed exchange is blocked at
// the watermark.
func TestAlarmDelayedMessagesBlockPublishers(t *testing.T) {
	const watermark = 1 << 20
	b := startBroker(t, Options{MemoryHighWatermark: watermark, alarmPolling: fastAlarms})
	pub, blocked := dialPublisher(t, b)
	ch, err := pub.Channel() // no cleanup of its own: its close would wait for the blocked reader
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("later", "x-delayed-message", false, false, false, false,
		amqp091.Table{"x-delayed-type": "direct"}))
	// The publisher has a goroutine of its own: the broker stops reading
	// a blocked connection, so a write that fills the socket's buffer
	// waits until the connection closes (b.Close at cleanup), and a loop
	// that published and looked for connection.blocked in turn waited
	// there with it when the notification came after that write began.
	body := make([]byte, 4096)
	stop := make(chan struct{})
	published := make(chan int, 1)
	go func() {
		n := 0
		defer func() { published <- n }()
		for ; n < 1<<14; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if ch.PublishWithContext(context.Background(), "later", "k", false, false,
				amqp091.Publishing{Body: body, Headers: amqp091.Table{"x-delay": int32(3_600_000)}}) != nil {
				return
			}
		}
	}()
	select {
	case bl := <-blocked:
		require.Equal(t, amqp091.Blocking{Active: true, Reason: "low on memory"}, bl)
	case n := <-published:
		t.Fatalf("never blocked after %d publishes", n)
	case <-time.After(amqptest.Timeout):
		t.Fatal("never blocked")
	}
	close(stop)
	// What is held stays (due in an hour): the alarm stays up. Alarms
	// reads the monitor's last sample, which may predate the held bytes
	// passing the watermark: near it a sample taken while the last
	// publishes move from the connection to the delayed store may see
	// less than the one before, and clear the alarm until the next. So
	// the alarm is looked for at a later sample.
	amqptest.Poll(t, func() bool { return b.held.Delayed.MemoryBytes() > watermark }, "the held messages are counted")
	amqptest.Poll(t, func() bool { return slices.Equal(b.Alarms(), []Alarm{AlarmMemory}) }, "the memory alarm is up")
}

// replyName has a requester on ch (its own connection) send a request to
// the queue rpc, and returns the reply-to name a responder sees on it.
func replyName(t *testing.T, b *Broker, requester interface {
	PublishWithContext(context.Context, string, string, bool, bool, amqp091.Publishing) error
}) string {
	t.Helper()
	require.NoError(t, requester.PublishWithContext(context.Background(), "", "rpc", false, false,
		amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", Body: []byte("request")}))
	resp, err := b.Channel(context.Background())
	require.NoError(t, err)
	var d amqp091.Delivery
	amqptest.Poll(t, func() bool {
		var ok bool
		d, ok, err = resp.Get("rpc", true)
		require.NoError(t, err)
		return ok
	}, "the request reached rpc")
	require.Contains(t, d.ReplyTo, "amq.rabbitmq.reply-to.")
	require.NoError(t, resp.Close())
	return d.ReplyTo
}

// TestAlarmDirectReplyToBounded: a direct-Channel requester that does not
// receive its replies holds maxDirectReplies of them at most, counted, and
// the rest are dropped, as RabbitMQ drops what a requester cannot take;
// received replies stop counting. They were buffered without bound.
func TestAlarmDirectReplyToBounded(t *testing.T) {
	const n, size = 256, 4096
	b := newDirectBroker(t, Options{})
	req, err := b.Channel(context.Background())
	require.NoError(t, err)
	_, err = req.QueueDeclare("rpc", false, false, false, false, nil)
	require.NoError(t, err)
	replies, err := req.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	require.NoError(t, err)
	name := replyName(t, b, req)
	resp, err := b.Channel(context.Background())
	require.NoError(t, err)
	publishConfirmed(t, resp, "", name, func(int) amqp091.Publishing { return amqp091.Publishing{Body: make([]byte, size)} }, n)
	held := b.held.Replies.MemoryBytes()
	t.Logf("%d replies of %d bytes sent to a requester that does not receive: %d KiB held", n, size, held>>10)
	require.Positive(t, held)
	require.LessOrEqual(t, held, int64(direct.MaxHeldReplies+size))
	require.Equal(t, held, b.alarmStatus().MemUsed)
	got := 0
	amqptest.Poll(t, func() bool {
		for {
			select {
			case <-replies:
				got++
			default:
				return b.held.Replies.MemoryBytes() == 0
			}
		}
	}, "received replies stop counting")
	require.Less(t, got, n, "the replies past the bound were dropped")
	require.Zero(t, b.alarmStatus().MemUsed)
}

// gatedConn is a client's side of a connection whose reads wait while the
// gate is held: a client that stops reading its socket.
type gatedConn struct {
	net.Conn
	gate *sync.RWMutex
}

func (c gatedConn) Read(p []byte) (int, error) {
	c.gate.RLock()
	c.gate.RUnlock()
	return c.Conn.Read(p)
}

// TestAlarmReplyToOutboxCounted: the replies waiting in the outbox of a
// requester that does not read its connection count against the memory
// alarm (no queue holds them) until they are written; the outbox takes
// them only up to its bound.
func TestAlarmReplyToOutboxCounted(t *testing.T) {
	const n, size = 512, 4096
	b := newDirectBroker(t, Options{})
	var gate sync.RWMutex
	conn, err := amqp091.DialConfig(b.URL(), amqp091.Config{Dial: func(network, addr string) (net.Conn, error) {
		c, err := b.Dial(network, addr)
		return gatedConn{Conn: c, gate: &gate}, err
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	req := amqptest.Channel(t, conn)
	_, err = req.QueueDeclare("rpc", false, false, false, false, nil)
	require.NoError(t, err)
	replies, err := req.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	require.NoError(t, err)
	name := replyName(t, b, req)

	gate.Lock() // the requester stops reading
	locked := true
	t.Cleanup(func() {
		if locked {
			gate.Unlock()
		}
	})
	resp, err := b.Channel(context.Background())
	require.NoError(t, err)
	publishConfirmed(t, resp, "", name, func(int) amqp091.Publishing { return amqp091.Publishing{Body: make([]byte, size)} }, n)
	held := b.alarmStatus().MemUsed
	t.Logf("%d replies of %d bytes to a requester that does not read: %d KiB counted", n, size, held>>10)
	require.Greater(t, held, int64(64<<10))
	require.Less(t, held, int64(n*size/2), "the outbox took them up to its bound")
	gate.Unlock()
	locked = false
	amqptest.Poll(t, func() bool {
		select {
		case <-replies:
		default:
		}
		return b.alarmStatus().MemUsed == 0
	}, "written replies stop counting")
}
