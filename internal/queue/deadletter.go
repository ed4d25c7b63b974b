package queue

import (
	"time"

	"github.com/warrenmq/broker/amqp"
)

// Dead-letter reasons, as RabbitMQ writes them into x-death.
const (
	ReasonRejected      = "rejected"
	ReasonExpired       = "expired"
	ReasonMaxLen        = "maxlen"
	ReasonDeliveryLimit = "delivery_limit"
)

// Death describes one dead-lettering of a message.
type Death struct {
	Queue       string
	Reason      string
	Exchange    string   // the exchange the message was published to
	RoutingKeys []string // the routing keys it was published with
	Time        time.Time
}

// DeadLetterProperties returns raw properties for a dead-lettered copy of a
// message, maintained the way RabbitMQ 3.13 does:
//   - x-death holds one table per (queue, reason), most recent first; a
//     repeat increments count and moves the entry to the front;
//   - x-first-death-queue/-reason/-exchange are set once;
//   - x-last-death-queue/-reason/-exchange follow the latest death;
//   - a per-message expiration is removed (so the copy does not expire
//     again at once) and kept in the new entry's original-expiration.
func DeadLetterProperties(raw []byte, d Death) ([]byte, error) {
	p, err := amqp.DecodeProperties(raw)
	if err != nil {
		return nil, err
	}
	h := amqp.Table{}
	for k, v := range p.Headers {
		h[k] = v
	}
	deaths, _ := h["x-death"].([]any)
	found := -1
	for i, e := range deaths {
		t, ok := e.(amqp.Table)
		if ok && t["queue"] == d.Queue && t["reason"] == d.Reason {
			found = i
			break
		}
	}
	var entry amqp.Table
	if found >= 0 {
		old := deaths[found].(amqp.Table)
		entry = make(amqp.Table, len(old))
		for k, v := range old {
			entry[k] = v
		}
		count, _ := IntArg(entry["count"])
		entry["count"] = count + 1
		deaths = append(deaths[:found:found], deaths[found+1:]...)
	} else {
		keys := make([]any, len(d.RoutingKeys))
		for i, k := range d.RoutingKeys {
			keys[i] = k
		}
		entry = amqp.Table{
			"queue":        d.Queue,
			"reason":       d.Reason,
			"count":        int64(1),
			"time":         d.Time.Truncate(time.Second),
			"exchange":     d.Exchange,
			"routing-keys": keys,
		}
		if p.Expiration != "" {
			entry["original-expiration"] = p.Expiration
		}
	}
	h["x-death"] = append([]any{entry}, deaths...)
	if _, ok := h["x-first-death-queue"]; !ok {
		h["x-first-death-queue"] = d.Queue
		h["x-first-death-reason"] = d.Reason
		h["x-first-death-exchange"] = d.Exchange
	}
	h["x-last-death-queue"] = d.Queue
	h["x-last-death-reason"] = d.Reason
	h["x-last-death-exchange"] = d.Exchange
	p.Headers = h
	p.Expiration = ""
	return p.Append(nil), nil
}

// IsDeadLetterCycle reports whether dead-lettering a message whose raw
// properties are raw into queue target would close a fully automatic
// cycle, which RabbitMQ drops: the message already died in target, and no
// death since then (that one included) was a rejection. A rejection by a
// consumer breaks the cycle, which is what makes retry loops work.
func IsDeadLetterCycle(raw []byte, reason, target string) bool {
	if reason == ReasonRejected {
		return false
	}
	p, err := amqp.DecodeProperties(raw)
	if err != nil {
		return false
	}
	deaths, _ := p.Headers["x-death"].([]any)
	for _, e := range deaths {
		t, ok := e.(amqp.Table)
		if !ok {
			return false
		}
		if t["reason"] == ReasonRejected {
			return false
		}
		if t["queue"] == target {
			return true
		}
	}
	return false
}

// IntArg reads an AMQP integer of any width from a table value, the way
// RabbitMQ accepts integer arguments.
func IntArg(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case uint8:
		return int64(n), true
	case int16:
		return int64(n), true
	case uint16:
		return int64(n), true
	case int32:
		return int64(n), true
	case uint32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}
