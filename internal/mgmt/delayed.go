package mgmt

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// DelayedMessage is a message an x-delayed-message exchange holds.
type DelayedMessage struct {
	RoutingKey string
	Due        time.Time
	Delay      time.Duration
	Publishing amqp091.Publishing
}

// Delayed is implemented by a model whose exchanges may hold delayed
// messages (found by type assertion, so a model without them need not).
type Delayed interface {
	// DelayedCount returns how many messages an exchange holds delayed.
	DelayedCount(vhost, exchange string) int64
	// PeekDelayed returns up to n of them, earliest due first.
	PeekDelayed(ctx context.Context, vhost, exchange string, n int) ([]DelayedMessage, error)
}

// maxDelayedPeek bounds one peek's answer.
const maxDelayedPeek = 10_000

// delayed answers GET /api/exchanges/{vhost}/{name}/delayed?count=N (a
// Warren addition; RabbitMQ's plugin shows only the count, as
// messages_delayed): the count and the first count (default 10) held
// messages, with their due times. Reading them needs read permission on
// the exchange, as get-messages needs it on a queue.
func (m *mgmt) delayed(c *mgmtCall) {
	vh, name, ok := m.existingExchange(c, mgmtRead)
	if !ok {
		return
	}
	d, ok := m.b.(Delayed)
	if !ok {
		writeJSON(c.w, http.StatusOK, map[string]any{"messages_delayed": 0, "messages": []any{}})
		return
	}
	n := 10
	if s := c.r.URL.Query().Get("count"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > maxDelayedPeek {
			WriteError(c.w, http.StatusBadRequest, "bad_request", "count must be an integer from 0 to "+strconv.Itoa(maxDelayedPeek))
			return
		}
		n = v
	}
	msgs, err := d.PeekDelayed(c.r.Context(), vh, name, n)
	if err != nil {
		WriteError(c.w, http.StatusInternalServerError, "internal_error", err.Error())
		return
	}
	out := make([]map[string]any, 0, len(msgs))
	for _, msg := range msgs {
		body := msg.Publishing.Body
		payload, enc := string(body), "string"
		if !utf8.Valid(body) {
			payload, enc = base64.StdEncoding.EncodeToString(body), "base64"
		}
		out = append(out, map[string]any{
			"routing_key": msg.RoutingKey, "due": msg.Due.UTC().Format(time.RFC3339Nano),
			"delay": msg.Delay.Milliseconds(), "properties": propertiesJSON(msg.Publishing),
			"payload": payload, "payload_bytes": len(body), "payload_encoding": enc,
		})
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"messages_delayed": d.DelayedCount(vh, name), "messages": out})
}

// localRandomExchangeType is the x-local-random exchange, in RabbitMQ's
// core from 4.0, with its description (rabbit_exchange_type_local_random).
var localRandomExchangeType = map[string]any{
	"name": "x-local-random", "description": "Picks one random local binding (queue) to route via (to).", "enabled": true,
}

// pluginExchangeTypes are the exchange types Warren builds in beside
// AMQP's four, as /api/overview lists them (RabbitMQ lists a plugin's
// type once the plugin is enabled).
var pluginExchangeTypes = []map[string]any{
	{"name": "x-consistent-hash", "description": "Consistent Hashing Exchange", "enabled": true},
	{"name": "x-modulus-hash", "description": "Modulus Hashing Exchange", "enabled": true},
	{"name": "x-delayed-message", "description": "Delayed Message Exchange.", "enabled": true},
	{"name": "x-message-deduplication", "description": "Message Deduplication Exchange.", "enabled": true},
}
