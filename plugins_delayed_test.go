package broker_test

import (
	"context"
	"math"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
)

// delayedMsg is a message with an x-delay header of ms milliseconds.
func delayedMsg(body string, ms any, headers amqp091.Table) amqp091.Publishing {
	h := amqp091.Table{"x-delay": ms}
	for k, v := range headers {
		h[k] = v
	}
	return amqp091.Publishing{Body: []byte(body), Headers: h}
}

// fakeBroker serves a broker on a fake clock, with opts' other fields.
func fakeBroker(t *testing.T, opts broker.Options) (*broker.Broker, *clock.Fake, *amqp091.Channel) {
	t.Helper()
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	opts.Clock = fc
	b := startBroker(t, opts)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	return b, fc, amqptest.ConfirmChannel(t, conn)
}

func delayedCount(t *testing.T, b *broker.Broker, exchange string) int64 {
	t.Helper()
	n, err := b.DelayedCount("/", exchange)
	require.NoError(t, err)
	return n
}

// Each x-delayed-type routes a delayed message by its own rules, at its
// due time by the broker's clock, with x-delay negated as the plugin
// delivers it.
func TestDelayedExchangeTypes(t *testing.T) {
	tests := []struct {
		typ      string
		bindKey  string
		bindArgs amqp091.Table
		key      string
		headers  amqp091.Table
		// miss is a publish the exchange must not route to the queue.
		missKey     string
		missHeaders amqp091.Table
	}{
		{typ: "direct", bindKey: "k", key: "k", missKey: "other"},
		{typ: "fanout", bindKey: "", key: "anything", missKey: ""},
		{typ: "topic", bindKey: "a.*", key: "a.b", missKey: "b.a"},
		{typ: "headers", bindArgs: amqp091.Table{"x-match": "all", "h": "v"}, headers: amqp091.Table{"h": "v"},
			missHeaders: amqp091.Table{"h": "w"}},
		{typ: "x-consistent-hash", bindKey: "1", key: "k", missKey: ""},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			b, fc, ch := fakeBroker(t, broker.Options{})
			require.NoError(t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false,
				amqp091.Table{"x-delayed-type": tt.typ}))
			amqptest.DeclareQueue(t, ch, "q", true)
			require.NoError(t, ch.QueueBind("q", tt.bindKey, "dx", false, tt.bindArgs))

			amqptest.PublishMsg(t, ch, "dx", tt.key, delayedMsg("hit", int32(5000), tt.headers))
			if tt.typ != "fanout" && tt.typ != "x-consistent-hash" {
				amqptest.PublishMsg(t, ch, "dx", tt.missKey, delayedMsg("miss", int32(5000), tt.missHeaders))
			}
			// Confirmed, held, not routed.
			require.Zero(t, queueStats(t, b, "q").Ready)
			held, err := b.PeekDelayed(context.Background(), "/", "dx", 10)
			require.NoError(t, err)
			require.NotEmpty(t, held)
			require.Equal(t, "hit", string(held[0].Publishing.Body))
			require.Equal(t, fc.Now().Add(5*time.Second), held[0].Due)
			require.Equal(t, 5*time.Second, held[0].Delay)

			fc.Advance(4999 * time.Millisecond)
			require.Zero(t, queueStats(t, b, "q").Ready)
			fc.Advance(time.Millisecond)
			waitStats(t, b, "q", func(c queueCounts) bool { return c.Ready == 1 })
			amqptest.Poll(t, func() bool { return delayedCount(t, b, "dx") == 0 }, "delayed count back to 0")
			d := amqptest.Get(t, ch, "q", true)
			require.Equal(t, "hit", string(d.Body))
			require.Equal(t, int32(-5000), d.Headers["x-delay"], "x-delay is negated on delivery, as the plugin does")
			require.Equal(t, "dx", d.Exchange)
			amqptest.RequireEmpty(t, ch, "q")
		})
	}
}

// Without a delay in (0, 2^32-1], a message is routed at once, as by the
// plugin.
func TestDelayedRoutesAtOnce(t *testing.T) {
	b, _, ch := fakeBroker(t, broker.Options{})
	require.NoError(t, ch.ExchangeDeclare("dx", "x-delayed-message", false, false, false, false,
		amqp091.Table{"x-delayed-type": "fanout"}))
	amqptest.DeclareQueue(t, ch, "q", false)
	require.NoError(t, ch.QueueBind("q", "", "dx", false, nil))
	for i, delay := range []any{nil, int32(0), int32(-10), "soon", int64(1) << 32} {
		msg := amqp091.Publishing{Body: []byte("now")}
		if delay != nil {
			msg = delayedMsg("now", delay, nil)
		}
		amqptest.PublishMsg(t, ch, "dx", "", msg)
		require.EqualValues(t, i+1, queueStats(t, b, "q").Ready, "delay %v", delay)
	}
	require.Zero(t, delayedCount(t, b, "dx"))
}

// Messages are routed in due order, a binding made after the publish is
// honoured, and mandatory never returns a delayed message.
func TestDelayedOrderAndLateBinding(t *testing.T) {
	b, fc, ch := fakeBroker(t, broker.Options{})
	returns := ch.NotifyReturn(make(chan amqp091.Return, 10))
	require.NoError(t, ch.ExchangeDeclare("dx", "x-delayed-message", false, false, false, false,
		amqp091.Table{"x-delayed-type": "direct"}))
	amqptest.DeclareQueue(t, ch, "q", false)
	ctx := context.Background()
	for _, m := range []struct {
		body  string
		delay int32
	}{{"third", 3000}, {"first", 1000}, {"second", 2000}, {"second-b", 2000}} {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "dx", "k", true, false, delayedMsg(m.body, m.delay, nil))
		require.NoError(t, err)
		ok, err := dc.WaitContext(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.EqualValues(t, 4, delayedCount(t, b, "dx"))
	// Bound after the publishes, before they are due.
	require.NoError(t, ch.QueueBind("q", "k", "dx", false, nil))
	fc.Advance(3 * time.Second)
	waitStats(t, b, "q", func(c queueCounts) bool { return c.Ready == 4 })
	require.Equal(t, []string{"first", "second", "second-b", "third"}, amqptest.GetAll(t, ch, "q"))
	select {
	case r := <-returns:
		t.Fatalf("a delayed message was returned: %+v", r)
	default:
	}

	// Due with no binding: dropped (the plugin's single attempt).
	require.NoError(t, ch.QueueUnbind("q", "k", "dx", nil))
	amqptest.PublishMsg(t, ch, "dx", "k", delayedMsg("lost", int32(10), nil))
	fc.Advance(10 * time.Millisecond)
	amqptest.Poll(t, func() bool { return delayedCount(t, b, "dx") == 0 }, "routed nowhere")
	amqptest.RequireEmpty(t, ch, "q")

	// Deleting the exchange drops what it holds.
	amqptest.PublishMsg(t, ch, "dx", "k", delayedMsg("gone", int32(10), nil))
	require.EqualValues(t, 1, delayedCount(t, b, "dx"))
	require.NoError(t, ch.ExchangeDelete("dx", false, false))
	require.Zero(t, delayedCount(t, b, "dx"))
}

func TestDelayedDeclareErrors(t *testing.T) {
	tests := []struct {
		name string
		typ  string
		args amqp091.Table
		code int
		text string
	}{
		{"no x-delayed-type", "x-delayed-message", nil, amqp091.PreconditionFailed, "'x-delayed-type' must be an existing exchange type"},
		{"unknown x-delayed-type", "x-delayed-message", amqp091.Table{"x-delayed-type": "x-nope"}, amqp091.PreconditionFailed, "must be an existing exchange type"},
		{"x-delayed-type not a string", "x-delayed-message", amqp091.Table{"x-delayed-type": int32(1)}, amqp091.PreconditionFailed, "must be an existing exchange type"},
		{"delayed of delayed", "x-delayed-message", amqp091.Table{"x-delayed-type": "x-delayed-message"}, amqp091.PreconditionFailed, "must be an existing exchange type"},
		{"hash args both", "x-consistent-hash", amqp091.Table{"hash-header": "h", "hash-property": "message_id"}, amqp091.PreconditionFailed, "mutually exclusive"},
		{"hash property", "x-consistent-hash", amqp091.Table{"hash-property": "app_id"}, amqp091.PreconditionFailed, "Unsupported property: app_id"},
		{"dedup without size", "x-message-deduplication", nil, amqp091.PreconditionFailed, "'x-cache-size' must be an integer greater than 0"},
		{"dedup size above the maximum", "x-message-deduplication", amqp091.Table{"x-cache-size": int64(math.MaxInt64)}, amqp091.PreconditionFailed,
			"Invalid argument, 'x-cache-size' must be at most 100000000, was 9223372036854775807"},
		{"dedup size above the maximum as a string", "x-message-deduplication", amqp091.Table{"x-cache-size": "100000001"}, amqp091.PreconditionFailed,
			"'x-cache-size' must be at most 100000000"},
		{"dedup bad ttl", "x-message-deduplication", amqp091.Table{"x-cache-size": int32(5), "x-cache-ttl": int32(0)}, amqp091.PreconditionFailed, "'x-cache-ttl' must be an integer greater than 0"},
		{"dedup bad persistence", "x-message-deduplication", amqp091.Table{"x-cache-size": int32(5), "x-cache-persistence": "tape"}, amqp091.PreconditionFailed, "'x-cache-persistence' must be either 'disk' or 'memory'"},
		{"unknown type", "x-random", nil, amqp091.PreconditionFailed, "unknown exchange type 'x-random'"},
	}
	_, conn := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := amqptest.Channel(t, conn)
			err := ch.ExchangeDeclare("x", tt.typ, false, false, false, false, tt.args)
			amqptest.RequireReply(t, err, tt.code, tt.text)
		})
	}
}

// A confirmed delayed message of a durable exchange survives a restart
// and is routed when due by the restarted broker's clock.
func TestDelayedSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	b, err := broker.New(broker.Options{DataDir: dir, Clock: fc})
	require.NoError(t, err)
	conn := amqptest.DialVia(t, b.Dial, "guest", "guest")
	ch := amqptest.ConfirmChannel(t, conn)
	require.NoError(t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false,
		amqp091.Table{"x-delayed-type": "direct"}))
	amqptest.DeclareQueue(t, ch, "q", true)
	require.NoError(t, ch.QueueBind("q", "k", "dx", false, nil))
	msg := delayedMsg("kept", int32(60_000), nil)
	msg.DeliveryMode = amqp091.Persistent
	amqptest.PublishMsg(t, ch, "dx", "k", msg)
	transient := delayedMsg("transient exchange", int32(60_000), nil)
	require.NoError(t, ch.ExchangeDeclare("tx", "x-delayed-message", false, false, false, false,
		amqp091.Table{"x-delayed-type": "direct"}))
	amqptest.PublishMsg(t, ch, "tx", "k", transient)
	require.NoError(t, b.Close())

	b, err = broker.New(broker.Options{DataDir: dir, Clock: fc})
	require.NoError(t, err)
	defer b.Close()
	n, err := b.DelayedCount("/", "dx")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	n, err = b.DelayedCount("/", "tx")
	require.NoError(t, err)
	require.Zero(t, n, "a non-durable exchange's messages go with it")
	conn = amqptest.DialVia(t, b.Dial, "guest", "guest")
	ch = amqptest.Channel(t, conn)
	fc.Advance(time.Minute)
	amqptest.Poll(t, func() bool {
		q, err := ch.QueueDeclarePassive("q", true, false, false, false, nil)
		return err == nil && q.Messages == 1
	}, "routed after the restart")
	d := amqptest.Get(t, ch, "q", true)
	require.Equal(t, "kept", string(d.Body))
	require.Equal(t, int32(-60_000), d.Headers["x-delay"])
}

// A broker killed with SIGKILL keeps every delayed message it confirmed,
// and routes each when due after it restarts.
func TestDelayedKill9KeepsConfirmed(t *testing.T) {
	srv, restart := killableServer(t)
	conn, err := amqp091.Dial(srv.URL())
	require.NoError(t, err)
	ch := amqptest.ConfirmChannel(t, conn)
	require.NoError(t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false,
		amqp091.Table{"x-delayed-type": "fanout"}))
	amqptest.DeclareQueue(t, ch, "q", true)
	require.NoError(t, ch.QueueBind("q", "", "dx", false, nil))
	const n = 200
	for i := range n {
		msg := delayedMsg(string(rune('a'+i%26)), int32(1500), nil)
		msg.DeliveryMode = amqp091.Persistent
		amqptest.PublishMsg(t, ch, "dx", "", msg)
	}
	srv.Kill(t)
	conn.Close()

	srv2 := restart()
	conn2, err := amqp091.Dial(srv2.URL())
	require.NoError(t, err)
	defer conn2.Close()
	ch2 := amqptest.Channel(t, conn2)
	amqptest.Poll(t, func() bool {
		q, err := ch2.QueueDeclarePassive("q", true, false, false, false, nil)
		return err == nil && q.Messages >= n
	}, "every confirmed delayed message routed after the restart")
}

// The management API shows how many messages a delayed exchange holds and
// lets an operator peek at them.
func TestDelayedManagementAPI(t *testing.T) {
	b, fc, ch := fakeBroker(t, broker.Options{})
	require.NoError(t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false,
		amqp091.Table{"x-delayed-type": "topic"}))
	for i, d := range []int32{3000, 1000, 2000} {
		m := delayedMsg("m"+string(rune('0'+i)), d, nil)
		m.MessageId = "id-" + string(rune('0'+i))
		amqptest.PublishMsg(t, ch, "dx", "a.b", m)
	}
	api := amqptest.NewAPI(t, b.ManagementHandler())
	got := api.Get("/api/exchanges/%2F/dx/delayed?count=2").(map[string]any)
	require.EqualValues(t, 3, got["messages_delayed"])
	msgs := got["messages"].([]any)
	require.Len(t, msgs, 2)
	first := msgs[0].(map[string]any)
	require.Equal(t, "m1", first["payload"])
	require.Equal(t, "a.b", first["routing_key"])
	require.EqualValues(t, 1000, first["delay"])
	require.Equal(t, fc.Now().Add(time.Second).UTC().Format(time.RFC3339Nano), first["due"])
	require.Equal(t, "id-1", first["properties"].(map[string]any)["message_id"])
	require.Equal(t, "m2", msgs[1].(map[string]any)["payload"])

	require.EqualValues(t, 3, api.Get("/api/exchanges/%2F/dx").(map[string]any)["messages_delayed"])
	for _, x := range api.Get("/api/exchanges/%2F").([]any) {
		x := x.(map[string]any)
		if x["name"] == "dx" {
			require.EqualValues(t, 3, x["messages_delayed"])
		} else {
			require.NotContains(t, x, "messages_delayed", "only delayed exchanges count")
		}
	}
	status, _, _ := api.Do("GET", "/api/exchanges/%2F/nope/delayed", "guest", nil)
	require.Equal(t, 404, status)
	status, _, _ = api.Do("GET", "/api/exchanges/%2F/dx/delayed?count=-1", "guest", nil)
	require.Equal(t, 400, status)
	types := api.Get("/api/overview").(map[string]any)["exchange_types"].([]any)
	var names []string
	for _, x := range types {
		names = append(names, x.(map[string]any)["name"].(string))
	}
	require.Contains(t, names, "x-delayed-message")
	require.Contains(t, names, "x-consistent-hash")
}

// In a transaction a delayed message is held at commit, not before, and
// a rollback drops it.
func TestDelayedTransaction(t *testing.T) {
	b, _, _ := fakeBroker(t, broker.Options{})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false,
		amqp091.Table{"x-delayed-type": "fanout"}))
	require.NoError(t, ch.Tx())
	ctx := context.Background()
	require.NoError(t, ch.PublishWithContext(ctx, "dx", "", false, false, delayedMsg("rolled back", int32(1000), nil)))
	require.NoError(t, ch.TxRollback())
	require.Zero(t, delayedCount(t, b, "dx"))
	require.NoError(t, ch.PublishWithContext(ctx, "dx", "", false, false, delayedMsg("committed", int32(1000), nil)))
	require.Zero(t, delayedCount(t, b, "dx"), "held only at commit")
	require.NoError(t, ch.TxCommit())
	require.EqualValues(t, 1, delayedCount(t, b, "dx"), "commit-ok follows the hold")
}

// Publish, WaitIdle, then look: a message published to an
// x-delayed-message exchange without confirms is held by the time
// WaitIdle returns, on every door, every time (the delayed service stores
// it on its own goroutine, after the publisher's channel moved on).
func TestWaitIdleCoversDelayedPublishes(t *testing.T) {
	for _, door := range parityDoors {
		t.Run(door.name, func(t *testing.T) {
			b := startBroker(t, broker.Options{})
			ch := door.open(t, b)()
			require.NoError(t, ch.ExchangeDeclare("dx", "x-delayed-message", false, false, false, false,
				amqp091.Table{"x-delayed-type": "fanout"}))
			for i := range 20 {
				require.NoError(t, ch.PublishWithContext(t.Context(), "dx", "", false, false, delayedMsg("m", 3_600_000, nil)))
				require.NoError(t, b.WaitIdle(t.Context()))
				require.Equal(t, int64(i+1), delayedCount(t, b, "dx"), "after publish %d", i+1)
			}
		})
	}
}
