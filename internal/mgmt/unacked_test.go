package mgmt_test

import (
	"encoding/json"
	"net/http"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestQueueUnacked: GET /api/queues/v/q/unacked lists the deliveries a
// client holds, with their channel (named as /api/channels names it),
// consumer tag and age; a management user sees only its own; a missing
// queue is 404.
func TestQueueUnacked(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	conn := amqptest.DialVia(t, b.Dial, "guest", "holder")
	ch := amqptest.Channel(t, conn)
	_, err := ch.QueueDeclare("work", false, false, false, false, nil)
	require.NoError(t, err)
	for _, id := range []string{"m1", "m2"} {
		require.NoError(t, ch.Publish("", "work", false, false, amqp091.Publishing{MessageId: id, Body: []byte("hello")}))
	}
	_, err = ch.Consume("work", "ctag", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Idle(t, b.WaitIdle)

	status, _, body := h.Do("GET", "/api/queues/%2F/work/unacked", "guest", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var got []struct {
		ChannelDetails struct {
			Name           string
			ConnectionName string `json:"connection_name"`
			Number         int
		} `json:"channel_details"`
		DeliveryTag   uint64 `json:"delivery_tag"`
		ConsumerTag   string `json:"consumer_tag"`
		DeliveryCount int    `json:"delivery_count"`
		AgeMS         *int64 `json:"age_ms"`
		RoutingKey    string `json:"routing_key"`
		MessageID     string `json:"message_id"`
		PayloadBytes  int    `json:"payload_bytes"`
	}
	require.NoError(t, json.Unmarshal(body, &got), "%s", body)
	require.Len(t, got, 2, "%s", body)
	channels := h.Get("/api/channels").([]any)
	require.Len(t, channels, 1)
	chName := channels[0].(map[string]any)["name"].(string)
	for i, u := range got {
		require.Equal(t, uint64(i+1), u.DeliveryTag)
		require.Equal(t, []string{"m1", "m2"}[i], u.MessageID)
		require.Equal(t, "ctag", u.ConsumerTag)
		require.Equal(t, 1, u.DeliveryCount)
		require.Equal(t, "work", u.RoutingKey)
		require.Equal(t, 5, u.PayloadBytes)
		require.Equal(t, 1, u.ChannelDetails.Number)
		require.Equal(t, chName, u.ChannelDetails.Name)
		require.Equal(t, channels[0].(map[string]any)["connection_details"].(map[string]any)["name"], u.ChannelDetails.ConnectionName)
		require.NotNil(t, u.AgeMS)
		require.GreaterOrEqual(t, *u.AgeMS, int64(0))
	}

	// The monitoring user sees every connection's; the management user
	// (with permissions on the vhost) none of guest's.
	status, _, body = h.Do("GET", "/api/queues/%2F/work/unacked", "mon", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got, 2)
	status, _, body = h.Do("PUT", "/api/permissions/%2F/mgr", "guest", map[string]string{"configure": ".*", "write": ".*", "read": ".*"})
	require.Contains(t, []int{http.StatusCreated, http.StatusNoContent}, status, "%s", body)
	status, _, body = h.Do("GET", "/api/queues/%2F/work/unacked", "mgr", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.JSONEq(t, "[]", string(body))

	status, _, _ = h.Do("GET", "/api/queues/%2F/nosuch/unacked", "guest", nil)
	require.Equal(t, http.StatusNotFound, status)
}
