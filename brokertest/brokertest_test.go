package brokertest_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
)

// TestParallelBrokers runs 200 parallel tests, each with its own broker,
// each talking to it through the socket-free door, over TCP and directly.
func TestParallelBrokers(t *testing.T) {
	for i := range 200 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			b := brokertest.New(t)
			conn := brokertest.Dial(t, b)
			ch, err := conn.Channel()
			require.NoError(t, err)
			_, err = ch.QueueDeclare("q", false, false, false, false, nil)
			require.NoError(t, err)
			require.NoError(t, ch.Confirm(false))
			confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
			body := fmt.Appendf(nil, "test %d", i)
			require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: body}))
			require.True(t, (<-confirms).Ack, "stored before it is confirmed")

			// Another door on the same broker sees the same queue.
			direct := brokertest.Channel(t, b)
			d, ok, err := direct.Get("q", false)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, body, d.Body)
			require.NoError(t, d.Ack(false))

			tcp, err := amqp091.Dial(b.URL())
			require.NoError(t, err)
			defer tcp.Close()
			tch, err := tcp.Channel()
			require.NoError(t, err)
			q, err := tch.QueueDeclarePassive("q", false, false, false, false, nil)
			require.NoError(t, err)
			require.Equal(t, 0, q.Messages)
		})
	}
}

func TestNewUnstarted(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{
		Users:  []broker.User{{Name: "app", Password: "secret"}},
		VHosts: []string{"tenant"},
	})
	require.Nil(t, b.Addr(), "not listening yet")
	conn, err := amqp091.DialConfig("amqp://app:secret@localhost/tenant", amqp091.Config{Dial: b.Dial})
	require.NoError(t, err, "Dial works before Start")
	require.NoError(t, conn.Close())

	brokertest.Start(t, b)
	host, _, err := net.SplitHostPort(b.Addr().String())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	conn, err = amqp091.Dial(b.URL() + "tenant")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
}

// TestCleanupOrder leaves a connection and a channel open: cleanup closes
// them before the broker, and the broker's Close does not wait for them.
func TestCleanupOrder(t *testing.T) {
	var b *broker.Broker
	var conn *amqp091.Connection
	t.Run("leaves things open", func(t *testing.T) {
		b = brokertest.New(t)
		conn = brokertest.Dial(t, b)
		ch := brokertest.Channel(t, b)
		_, err := ch.QueueDeclare("q", false, false, false, false, nil)
		require.NoError(t, err)
	})
	require.True(t, conn.IsClosed())
	_, err := b.Dial("", "")
	require.ErrorIs(t, err, broker.ErrClosed)
}

// TestChannelOptions: Channel passes its options on, so a test can act as
// one of the broker's users on one of its vhosts, with that user's
// permissions.
func TestChannelOptions(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{VHosts: []string{"/", "orders"}})
	require.NoError(t, b.Admin().PutUser(t.Context(), broker.User{Name: "reader", Password: "pw"}))
	require.NoError(t, b.Admin().PutPermission(t.Context(), broker.Permission{User: "reader", VHost: "orders", Read: ".*"}))
	ch := brokertest.Channel(t, b, broker.AsUser("reader"), broker.OnVHost("orders"))
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, amqp091.AccessRefused, ae.Code)
}
