package rabbitnode

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestStart: a persistent message confirmed into a durable queue is seen
// by the management API and by rabbitmqctl, survives Kill and Restart on
// the same ports, AMQPS verifies against the node's CA, and the plugins
// asked for are running.
func TestStart(t *testing.T) {
	n := Start(t, Options{TLS: true, Plugins: []string{"rabbitmq_shovel", "rabbitmq_federation"}})

	conn, err := amqp.Dial(n.URL())
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("kept", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "kept", false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("hello")})
	require.NoError(t, err)
	ok, err := dc.WaitContext(context.Background())
	require.NoError(t, err)
	require.True(t, ok, "nacked")
	require.NoError(t, conn.Close())

	require.Eventually(t, func() bool { return queueMessages(t, n, "kept") == 1 }, 10*time.Second, 100*time.Millisecond)
	require.Contains(t, n.Ctl(t, "list_queues", "name", "messages"), "kept\t1")
	enabled := n.Plugins(t, "list", "-e", "-m")
	for _, p := range []string{"rabbitmq_management", "rabbitmq_shovel", "rabbitmq_federation"} {
		require.Contains(t, enabled, p)
	}

	n.Kill(t)
	_, err = net.DialTimeout("tcp", net.JoinHostPort(n.Host, strconv.Itoa(n.AMQPPort)), time.Second)
	require.Error(t, err, "the AMQP port still accepts after Kill")
	n.Restart(t)
	require.Eventually(t, func() bool { return queueMessages(t, n, "kept") == 1 }, 30*time.Second, 200*time.Millisecond)

	tconn, err := amqp.DialTLS(n.TLSURL(), &tls.Config{RootCAs: n.CA.Pool, ServerName: n.Host})
	require.NoError(t, err)
	require.NoError(t, tconn.Close())
}

func queueMessages(t *testing.T, n *Node, name string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, n.MgmtURL()+"/api/queues/%2F/"+name, nil)
	require.NoError(t, err)
	req.SetBasicAuth(User, Password)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	var q struct {
		Messages int `json:"messages"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&q))
	return q.Messages
}
