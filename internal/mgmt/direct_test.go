package mgmt_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/metrics/promtest"
)

// TestDirectConnectionsAreListed: a direct Channel is a connection like
// RabbitMQ's direct (Erlang client) ones: listed by the management API
// with type "direct" and protocol "Direct 0-9-1", counted by Stats and the
// metrics, and closed by DELETE with 320 seen by its NotifyClose.
func TestDirectConnectionsAreListed(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := brokertest.Channel(t, b)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	_, err := ch.QueueDeclare("direct.q", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Qos(3, 0, false))
	_, err = ch.Consume("direct.q", "direct-ctag", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Idle(t, b.WaitIdle)

	conns := h.Get("/api/connections").([]any)
	require.Len(t, conns, 1)
	c := conns[0].(map[string]any)
	name := c["name"].(string)
	for k, want := range map[string]any{
		"type": "direct", "protocol": "Direct 0-9-1", "user": "guest", "vhost": "/", "state": "running",
		"host": "unknown", "port": "unknown", "peer_host": "unknown", "peer_port": "unknown",
		"channels": 1.0, "client_properties": map[string]any{},
	} {
		require.Equal(t, want, c[k], k)
	}
	require.Positive(t, c["connected_at"])
	for _, k := range []string{"recv_oct", "send_oct", "frame_max", "channel_max", "timeout", "ssl"} {
		require.NotContains(t, c, k, "a direct connection has no socket")
	}
	require.Equal(t, c, h.Get("/api/connections/"+url.PathEscape(name)))

	chans := h.Get("/api/channels").([]any)
	require.Len(t, chans, 1)
	cj := chans[0].(map[string]any)
	require.Equal(t, name+" (1)", cj["name"])
	require.EqualValues(t, 1, cj["consumer_count"])
	require.EqualValues(t, 3, cj["prefetch_count"])
	require.Equal(t, map[string]any{"name": name, "peer_host": "unknown", "peer_port": "unknown"}, cj["connection_details"])
	cons := h.Get("/api/consumers").([]any)
	require.Len(t, cons, 1)
	require.Equal(t, "direct-ctag", cons[0].(map[string]any)["consumer_tag"])

	infos := b.Connections()
	require.Len(t, infos, 1)
	require.True(t, infos[0].Direct)
	require.Equal(t, name, infos[0].ID)
	require.Equal(t, 1, infos[0].Channels)
	s := b.Stats(context.Background())
	require.Equal(t, 1, s.Connections)
	require.Equal(t, 1, s.Channels)
	require.Equal(t, 1, s.Consumers)
	require.EqualValues(t, 1, s.ConnectionsOpened)
	require.EqualValues(t, 1, s.ChannelsOpened)
	fams := promtest.Scrape(t, b.MetricsHandler(broker.MetricsOptions{}))
	for name, want := range map[string]float64{
		"rabbitmq_connections": 1, "rabbitmq_channels": 1, "rabbitmq_consumers": 1,
		"rabbitmq_connections_opened_total": 1, "rabbitmq_channels_opened_total": 1,
	} {
		require.Equal(t, want, fams[name].Samples[""], name)
	}

	status, _, body := h.Do("DELETE", "/api/connections/"+url.PathEscape(name), "guest", nil)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	e := amqptest.AwaitClose(t, closed)
	require.Equal(t, amqp091.ConnectionForced, e.Code)
	require.Equal(t, "CONNECTION_FORCED - Closed via management plugin", e.Reason)
	require.True(t, ch.IsClosed())
	amqptest.Idle(t, b.WaitIdle)
	s = b.Stats(context.Background())
	require.Zero(t, s.Connections)
	require.EqualValues(t, 1, s.ConnectionsClosed)
	require.EqualValues(t, 1, s.ChannelsClosed)
	require.Empty(t, h.Get("/api/connections"))
}
