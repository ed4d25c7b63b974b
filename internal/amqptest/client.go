package amqptest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// Dial connects amqp091-go to rawURL with cfg and closes the connection on
// cleanup.
func Dial(tb testing.TB, rawURL string, cfg amqp091.Config) *amqp091.Connection {
	tb.Helper()
	conn, err := amqp091.DialConfig(rawURL, cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = conn.Close() })
	return conn
}

// DialVia connects amqp091-go as user (password = user name) over dial,
// for example a broker's Dial (a pipe, so the broker's WaitIdle covers what
// the client wrote), with connection_name name, and closes the connection
// on cleanup. The URL's host is never dialled: dial chooses the peer.
func DialVia(tb testing.TB, dial func(network, addr string) (net.Conn, error), user, name string) *amqp091.Connection {
	tb.Helper()
	return Dial(tb, "amqp://"+user+":"+user+"@127.0.0.1:5672/", amqp091.Config{
		Dial:       dial,
		Properties: amqp091.Table{"connection_name": name},
	})
}

// UserURL returns rawURL (an amqp:// URL such as a broker's URL()) with
// its credentials replaced by user and password.
func UserURL(rawURL, user, password string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(fmt.Sprintf("amqptest: %q: %v", rawURL, err))
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// RequireWorks opens and closes a channel on conn: the connection is open
// and the server still answers it.
func RequireWorks(tb testing.TB, conn *amqp091.Connection) {
	tb.Helper()
	ch, err := conn.Channel()
	require.NoError(tb, err)
	require.NoError(tb, ch.Close())
}

// RequireReply is RequireCode that also requires the reply text to contain
// each of texts.
func RequireReply[C Code](tb testing.TB, err error, code C, texts ...string) {
	tb.Helper()
	RequireCode(tb, err, code)
	_, labelled, _ := reply(err)
	_, text, _ := strings.Cut(labelled, ": ")
	for _, want := range texts {
		require.Contains(tb, text, want, "reply text")
	}
}

// ConfirmChannel opens a channel on conn in confirm mode, closed on
// cleanup.
func ConfirmChannel(tb testing.TB, conn *amqp091.Connection) *amqp091.Channel {
	tb.Helper()
	ch := Channel(tb, conn)
	require.NoError(tb, ch.Confirm(false))
	return ch
}

// DeclareQueue declares a queue that is neither exclusive nor auto-delete.
func DeclareQueue(tb testing.TB, ch *amqp091.Channel, name string, durable bool) {
	tb.Helper()
	_, err := ch.QueueDeclare(name, durable, false, false, false, nil)
	require.NoError(tb, err)
}

// Publish publishes body to exchange with routing key key on a
// confirm-mode channel and waits for the broker's ack: afterwards the
// message is in every queue it was routed to.
func Publish(tb testing.TB, ch *amqp091.Channel, exchange, key, body string) {
	tb.Helper()
	PublishMsg(tb, ch, exchange, key, amqp091.Publishing{Body: []byte(body)})
}

// PublishMsg is Publish for a message with properties.
func PublishMsg(tb testing.TB, ch *amqp091.Channel, exchange, key string, msg amqp091.Publishing) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
	require.NoError(tb, err)
	acked, err := dc.WaitContext(ctx)
	require.NoError(tb, err)
	require.True(tb, acked, "publish to %q/%q nacked", exchange, key)
}

// PublishBodies publishes one message per body to queue through the
// default exchange without waiting for anything; persistent sets delivery
// mode 2.
func PublishBodies(tb testing.TB, ch *amqp091.Channel, queue string, persistent bool, bodies ...string) {
	tb.Helper()
	mode := amqp091.Transient
	if persistent {
		mode = amqp091.Persistent
	}
	for _, b := range bodies {
		require.NoError(tb, ch.PublishWithContext(context.Background(), "", queue, false, false,
			amqp091.Publishing{Body: []byte(b), DeliveryMode: mode}))
	}
}

// PublishConfirmed puts ch in confirm mode, publishes bodies as
// PublishBodies does and waits until every one is acked.
func PublishConfirmed(tb testing.TB, ch *amqp091.Channel, queue string, persistent bool, bodies ...string) {
	tb.Helper()
	require.NoError(tb, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, len(bodies)))
	PublishBodies(tb, ch, queue, persistent, bodies...)
	for range bodies {
		c, _ := Receive(tb, confirms)
		require.True(tb, c.Ack, "publish %d nacked", c.DeliveryTag)
	}
}

// Numbered returns n bodies "prefix-0" ... "prefix-(n-1)".
func Numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// Get does one basic.get that must find a message.
func Get(tb testing.TB, ch *amqp091.Channel, queue string, autoAck bool) amqp091.Delivery {
	tb.Helper()
	d, ok, err := ch.Get(queue, autoAck)
	require.NoError(tb, err)
	require.True(tb, ok, "queue %s is empty", queue)
	return d
}

// RequireEmpty requires basic.get-empty from queue (a message it finds
// instead is acked).
func RequireEmpty(tb testing.TB, ch *amqp091.Channel, queue string) {
	tb.Helper()
	d, ok, err := ch.Get(queue, true)
	require.NoError(tb, err)
	require.False(tb, ok, "unexpected message %q", d.Body)
}

// GetAll drains queue with basic.get (auto-ack) and returns the bodies in
// order.
func GetAll(tb testing.TB, ch *amqp091.Channel, queue string) []string {
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

// QueueExists asks with a passive declare on a fresh channel of conn: true
// when the queue exists, false on 404; any other answer fails the test.
func QueueExists(tb testing.TB, conn *amqp091.Connection, name string) bool {
	tb.Helper()
	ch, err := conn.Channel()
	require.NoError(tb, err)
	defer func() { _ = ch.Close() }()
	_, err = ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err == nil {
		return true
	}
	RequireCode(tb, err, amqp091.NotFound)
	return false
}

// ExchangeExists is QueueExists for exchanges.
func ExchangeExists(tb testing.TB, conn *amqp091.Connection, name string) bool {
	tb.Helper()
	ch, err := conn.Channel()
	require.NoError(tb, err)
	defer func() { _ = ch.Close() }()
	err = ch.ExchangeDeclarePassive(name, "direct", false, false, false, false, nil)
	if err == nil {
		return true
	}
	RequireCode(tb, err, amqp091.NotFound)
	return false
}
