package cluster_test

import (
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestStreamOnEveryNode: a stream declared on one node is served by all
// three; each node's consumers read the whole log from first, with the
// same offsets, whichever node the messages were published on.
func TestStreamOnEveryNode(t *testing.T) {
	c := newTestCluster(t)
	_, ch0 := c.dial(0)
	_, err := ch0.QueueDeclare("s", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	require.NoError(t, err)
	for i := range 3 {
		c.declared(i, "s")
	}
	var want []string
	for i := range 3 {
		_, ch := c.dial(i)
		p := newConfirmer(t, ch)
		for j := range 20 {
			body := fmt.Sprintf("n%d-%d", i, j)
			require.True(t, p.publish("", "s", body, waitFor), "publish %s", body)
			want = append(want, body)
		}
	}
	for i := range 3 {
		conn, _ := c.dial(i)
		ch := amqptest.Channel(t, conn)
		require.NoError(t, ch.Qos(7, 0, false))
		ds, err := ch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
		require.NoError(t, err)
		for k, body := range want {
			d := amqptest.Next(t, ds)
			require.Equal(t, body, string(d.Body), "node %d", i+1)
			require.Equal(t, int64(k), d.Headers["x-stream-offset"], "node %d", i+1)
			require.NoError(t, d.Ack(false))
		}
	}
	// A consumer waiting at next on node 3 gets what node 1 publishes.
	conn, _ := c.dial(2)
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.Qos(1, 0, false))
	ds, err := ch.Consume("s", "", false, false, false, false, nil)
	require.NoError(t, err)
	require.True(t, newConfirmer(t, ch0).publish("", "s", "late", waitFor))
	d := amqptest.Next(t, ds)
	require.Equal(t, "late", string(d.Body))
	require.Equal(t, int64(len(want)), d.Headers["x-stream-offset"])

	// A tracked offset saved on node 1 is where the same tag resumes on
	// node 2.
	tconn, _ := c.dial(0)
	tch := amqptest.Channel(t, tconn)
	require.NoError(t, tch.Qos(5, 0, false))
	tds, err := tch.Consume("s", "trk", false, false, false, false, amqp091.Table{"x-stream-offset": nil})
	require.NoError(t, err)
	for k := range 5 {
		d := amqptest.Next(t, tds)
		require.Equal(t, want[k], string(d.Body))
		require.NoError(t, d.Ack(false))
	}
	require.NoError(t, tch.Close())
	tconn2, _ := c.dial(1)
	tch2 := amqptest.Channel(t, tconn2)
	require.NoError(t, tch2.Qos(5, 0, false))
	tds2, err := tch2.Consume("s", "trk", false, false, false, false, amqp091.Table{"x-stream-offset": nil})
	require.NoError(t, err)
	d = amqptest.Next(t, tds2)
	require.Equal(t, want[5], string(d.Body))
}
