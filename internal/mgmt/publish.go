package mgmt

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/amqpconv"
)

// publishKeys are the keys a publish request must carry, in the order
// RabbitMQ's with_decode names the missing ones.
var publishKeys = [...]string{"routing_key", "properties", "payload", "payload_encoding"}

// publish is RabbitMQ's rabbit_mgmt_wm_exchange_publish (copied from
// 3.13/4.x): it publishes one message to the exchange on a direct channel
// of the requesting user, mandatory and in confirm mode, and answers
// {"routed": bool}: false when the basic.return came back, that is when no
// queue got it. The publish takes the path an AMQP publish takes (write
// and topic permissions, the user_id check, the expiration check,
// routing). While a resource alarm is raised it answers 503 rather than
// wait (an alarm raised after that check makes it wait, as an AMQP
// publisher does, until it clears or the client gives up). A channel
// error is answered as the get's are.
func (m *mgmt) publish(c *mgmtCall) {
	vh, name, ok := m.existingExchange(c, mgmtWrite)
	if !ok {
		return
	}
	var body map[string]any
	if !readBody(c, &body) {
		return
	}
	keys := make([]bodyKey, len(publishKeys))
	for i, k := range publishKeys {
		_, set := body[k]
		keys[i] = bodyKey{k, set}
	}
	if refuseMissing(c.w, keys...) {
		return
	}
	key, ok := body["routing_key"].(string)
	if !ok {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "routing_key must be a string")
		return
	}
	raw, ok := body["payload"].(string)
	if !ok {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "payload_not_string")
		return
	}
	var payload []byte
	switch enc, _ := body["payload_encoding"].(string); enc {
	case "string":
		payload = []byte(raw)
	case "base64":
		var err error
		if payload, err = base64.StdEncoding.DecodeString(raw); err != nil {
			WriteError(c.w, http.StatusBadRequest, "bad_request", "not_base64")
			return
		}
	default:
		WriteError(c.w, http.StatusBadRequest, "bad_request", fmt.Sprintf("{unsupported_encoding,%s}", jsonText(body["payload_encoding"])))
		return
	}
	msg, err := publishingJSON(body["properties"])
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	msg.Body = payload
	if n := m.b.Node(); n.MemAlarm || n.DiskFreeAlarm {
		// RabbitMQ lets a management publish through an alarm (its direct
		// connections are not blocked, rabbitmq-server#1986); Warren's
		// direct channel waits as an AMQP publisher does, which would hold
		// the request until the alarm clears. Refused at once instead.
		WriteError(c.w, http.StatusServiceUnavailable, "service_unavailable", "a resource alarm is in effect: publishing is blocked until it clears")
		return
	}
	ch, err := m.b.OpenChannel(c.r.Context(), c.user, vh)
	if err != nil {
		writeChannelError(c.w, err)
		return
	}
	defer ch.Close()
	// Buffered: the channel's notifier hands the return, then the confirm,
	// without waiting for this handler, and in that order.
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	fail := func(err error) {
		if cerr := ch.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = amqp091.ErrClosed
		}
		writeAMQPError(c.w, fromAMQP091Error(err))
	}
	if err := ch.Confirm(false); err != nil {
		fail(err)
		return
	}
	if err := ch.PublishWithContext(c.r.Context(), name, key, true, false, msg); err != nil {
		fail(err)
		return
	}
	select {
	case conf, ok := <-confirms:
		if !ok {
			fail(nil) // closed by the broker: Close returns why
			return
		}
		if !conf.Ack {
			WriteError(c.w, http.StatusBadRequest, "bad_request", "Unable to publish message. Check queue limits.")
			return
		}
		routed := true
		select {
		case <-returns:
			routed = false
		default:
		}
		writeJSON(c.w, http.StatusOK, map[string]bool{"routed": routed})
	case <-c.r.Context().Done():
		// The client went away; closing the channel settles the publish.
	}
}

// jsonText is v as JSON, for an error's reason.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// publishingJSON is the reverse of propertiesJSON: RabbitMQ's JSON of
// basic properties (rabbit_mgmt_format:to_basic_properties) as a
// Publishing. As RabbitMQ, keys it does not know are ignored; a value of
// the wrong type is an error naming the property.
func publishingJSON(v any) (amqp091.Publishing, error) {
	var p amqp091.Publishing
	props, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return p, nil
		}
		return p, fmt.Errorf("properties must be an object, not %s", jsonText(v))
	}
	for k, x := range props {
		var err error
		switch k {
		case "content_type":
			p.ContentType, err = propString(k, x)
		case "content_encoding":
			p.ContentEncoding, err = propString(k, x)
		case "correlation_id":
			p.CorrelationId, err = propString(k, x)
		case "reply_to":
			p.ReplyTo, err = propString(k, x)
		case "expiration":
			p.Expiration, err = propString(k, x)
		case "message_id":
			p.MessageId, err = propString(k, x)
		case "type":
			p.Type, err = propString(k, x)
		case "user_id":
			p.UserId, err = propString(k, x)
		case "app_id":
			p.AppId, err = propString(k, x)
		case "delivery_mode":
			p.DeliveryMode, err = propOctet(k, x)
		case "priority":
			p.Priority, err = propOctet(k, x)
		case "timestamp":
			var n json.Number
			if n, ok = x.(json.Number); !ok {
				return p, fmt.Errorf("property timestamp must be an integer (seconds), not %s", jsonText(x))
			}
			sec, perr := n.Int64()
			if perr != nil {
				return p, fmt.Errorf("property timestamp must be an integer (seconds), not %s", n)
			}
			p.Timestamp = time.Unix(sec, 0)
		case "headers":
			h, ok := x.(map[string]any)
			if !ok && x != nil {
				return p, fmt.Errorf("property headers must be an object, not %s", jsonText(x))
			}
			t, terr := definitions.JSONTable(h)
			if terr != nil {
				return p, fmt.Errorf("property headers: %w", terr)
			}
			if t != nil {
				p.Headers = amqpconv.FromTable(t)
			}
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

func propString(k string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("property %s must be a string, not %s", k, jsonText(v))
	}
	if len(s) > 255 {
		return "", fmt.Errorf("property %s is longer than 255 bytes", k)
	}
	return s, nil
}

func propOctet(k string, v any) (uint8, error) {
	n, ok := v.(json.Number)
	i, err := n.Int64()
	if !ok || err != nil || i < 0 || i > 255 {
		return 0, fmt.Errorf("property %s must be an integer from 0 to 255, not %s", k, jsonText(v))
	}
	return uint8(i), nil
}
