package broker

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// Helpers of the topology tests (topology_*_test.go). They take testing.TB
// where a benchmark shares them.

// topoLiveness bounds how long a test waits for something the broker does
// asynchronously (a server-sent channel.close, a queue deleted after its
// connection went). It guards against a hang; it does not judge speed.
const topoLiveness = 10 * time.Second

// topoSetup starts an in-memory broker on TCP and connects one client.
func topoSetup(t *testing.T) (*Broker, *amqp091.Connection) {
	t.Helper()
	checkGoroutines(t)
	b := startBroker(t, Options{})
	return b, dial(t, b.URL(), amqp091.Config{})
}

// topoConfirmChannel opens a channel in confirm mode.
func topoConfirmChannel(tb testing.TB, conn *amqp091.Connection) *amqp091.Channel {
	tb.Helper()
	ch := amqptest.Channel(tb, conn)
	require.NoError(tb, ch.Confirm(false))
	return ch
}

// topoPublish publishes body on a confirm-mode channel and waits for the
// broker's ack: afterwards the message is in every queue it was routed to.
func topoPublish(tb testing.TB, ch *amqp091.Channel, exchange, key, body string) {
	tb.Helper()
	topoPublishMsg(tb, ch, exchange, key, amqp091.Publishing{Body: []byte(body)})
}

func topoPublishMsg(tb testing.TB, ch *amqp091.Channel, exchange, key string, msg amqp091.Publishing) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topoLiveness)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
	require.NoError(tb, err)
	acked, err := dc.WaitContext(ctx)
	require.NoError(tb, err)
	require.True(tb, acked, "publish to %q/%q nacked", exchange, key)
}

// topoGetAll drains queue with basic.get (auto-ack) and returns the bodies in
// order.
func topoGetAll(tb testing.TB, ch *amqp091.Channel, queue string) []string {
	tb.Helper()
	var bodies []string
	for {
		d, ok, err := ch.Get(queue, true)
		require.NoError(tb, err)
		if !ok {
			return bodies
		}
		bodies = append(bodies, string(d.Body))
	}
}

// topoRequireCode requires err to carry code and a reply text containing
// each of texts.
func topoRequireCode(tb testing.TB, err error, code int, texts ...string) {
	tb.Helper()
	var ae *amqp091.Error
	require.ErrorAs(tb, err, &ae)
	require.Equal(tb, code, ae.Code, "reason: %s", ae.Reason)
	for _, text := range texts {
		require.Contains(tb, ae.Reason, text)
	}
}

// topoAwaitClose waits for the server to close what errs was registered on
// (a channel or a connection) and returns the error it sent.
func topoAwaitClose(tb testing.TB, errs <-chan *amqp091.Error) *amqp091.Error {
	tb.Helper()
	t := time.NewTimer(topoLiveness)
	defer t.Stop()
	select {
	case e, ok := <-errs:
		require.True(tb, ok, "closed without an error")
		require.NotNil(tb, e)
		return e
	case <-t.C:
		require.FailNow(tb, "the server did not close within the liveness bound")
		return nil
	}
}

// topoRequireServes shows the broker still serves conn: a new channel
// declares a server-named queue, routes a message to it and reads it back.
func topoRequireServes(tb testing.TB, conn *amqp091.Connection) {
	tb.Helper()
	ch := topoConfirmChannel(tb, conn)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(tb, err)
	topoPublish(tb, ch, "", q.Name, "still serving")
	require.Equal(tb, []string{"still serving"}, topoGetAll(tb, ch, q.Name))
	_, err = ch.QueueDelete(q.Name, false, false, false)
	require.NoError(tb, err)
	require.NoError(tb, ch.Close())
}

// topoQueueExists asks with a passive declare on a fresh channel: true when
// the queue exists, false on 404.
func topoQueueExists(tb testing.TB, conn *amqp091.Connection, name string) bool {
	tb.Helper()
	ch, err := conn.Channel()
	require.NoError(tb, err)
	defer func() { _ = ch.Close() }()
	_, err = ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err == nil {
		return true
	}
	topoRequireCode(tb, err, 404)
	return false
}

// topoExchangeExists is topoQueueExists for exchanges.
func topoExchangeExists(tb testing.TB, conn *amqp091.Connection, name string) bool {
	tb.Helper()
	ch, err := conn.Channel()
	require.NoError(tb, err)
	defer func() { _ = ch.Close() }()
	err = ch.ExchangeDeclarePassive(name, "direct", false, false, false, false, nil)
	if err == nil {
		return true
	}
	topoRequireCode(tb, err, 404)
	return false
}

// topoAwaitQueueGone polls until the queue is gone: for deletions the
// broker finishes after its reply to the client (a connection's exclusive
// queues go once it has closed). Bounded by topoLiveness.
func topoAwaitQueueGone(tb testing.TB, conn *amqp091.Connection, name string) {
	tb.Helper()
	deadline := time.Now().Add(topoLiveness)
	for topoQueueExists(tb, conn, name) {
		if time.Now().After(deadline) {
			require.FailNow(tb, "queue still exists", "queue %q", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
