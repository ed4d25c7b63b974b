package mgmt

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// UnackedLister is the optional part of a Broker that lists a queue's
// deliveries waiting for an ack, for GET /api/queues/v/q/unacked (a Warren
// extension: RabbitMQ's API shows a channel's unacked count, not which
// deliveries it holds). A Broker without it answers that route 404.
type UnackedLister interface {
	// Unacked lists the queue's unsettled deliveries, sorted by
	// connection, channel and delivery tag; an error wrapping ErrNotFound
	// when there is no such queue.
	Unacked(ctx context.Context, vhost, queue string) ([]Unacked, error)
}

// Unacked is one delivery a client holds without having settled it.
type Unacked struct {
	Connection    string
	Channel       uint16
	DeliveryTag   uint64
	ConsumerTag   string // "" for basic.get
	DeliveryCount uint32
	Redelivered   bool
	// Age is how long it has been held (by the broker's clock); negative
	// when unknown.
	Age                             time.Duration
	Exchange, RoutingKey, MessageID string
	PayloadBytes                    int
}

// unackedJSON is one unacked delivery as the route answers it; the
// channel is named as /api/channels names it.
type unackedJSON struct {
	ChannelDetails map[string]any `json:"channel_details"`
	DeliveryTag    uint64         `json:"delivery_tag"`
	ConsumerTag    string         `json:"consumer_tag"`
	DeliveryCount  uint32         `json:"delivery_count"`
	Redelivered    bool           `json:"redelivered"`
	// AgeMS is null when unknown.
	AgeMS        *int64 `json:"age_ms"`
	Exchange     string `json:"exchange"`
	RoutingKey   string `json:"routing_key"`
	MessageID    string `json:"message_id"`
	PayloadBytes int    `json:"payload_bytes"`
}

// unacked is GET /api/queues/{vhost}/{name}/unacked: the queue's unsettled
// deliveries with their channel and age. Users who see only their own
// connections (management, policymaker) see only their own deliveries.
func (m *mgmt) unacked(c *mgmtCall) {
	ul, ok := m.b.(UnackedLister)
	if !ok {
		notFound(c.w)
		return
	}
	vh, name, ok := m.queueParam(c)
	if !ok {
		return
	}
	us, err := ul.Unacked(c.r.Context(), vh, name)
	if errors.Is(err, ErrNotFound) {
		notFound(c.w)
		return
	}
	if err != nil {
		writeAMQPError(c.w, err)
		return
	}
	conns := make(map[string]Connection)
	for _, conn := range m.visibleConns(c) {
		conns[conn.ID] = conn
	}
	out := make([]unackedJSON, 0, len(us))
	for _, u := range us {
		conn, ok := conns[u.Connection]
		if !ok {
			continue // another user's, or closed since
		}
		peerHost, peerPort := peerOf(conn)
		j := unackedJSON{
			ChannelDetails: map[string]any{
				"name": channelName(conn.ID, u.Channel), "number": u.Channel, "connection_name": conn.ID,
				"user": conn.User, "peer_host": peerHost, "peer_port": peerPort,
			},
			DeliveryTag: u.DeliveryTag, ConsumerTag: u.ConsumerTag, DeliveryCount: u.DeliveryCount,
			Redelivered: u.Redelivered, Exchange: u.Exchange, RoutingKey: u.RoutingKey,
			MessageID: u.MessageID, PayloadBytes: u.PayloadBytes,
		}
		if u.Age >= 0 {
			ms := u.Age.Milliseconds()
			j.AgeMS = &ms
		}
		out = append(out, j)
	}
	writeJSON(c.w, http.StatusOK, out)
}
