package mgmt

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/amqpconv"
)

// getResult is one message of a get's answer without its payload, which
// writeGetResult streams after these fields.
type getResult struct {
	PayloadBytes int            `json:"payload_bytes"`
	Redelivered  bool           `json:"redelivered"`
	Exchange     string         `json:"exchange"`
	RoutingKey   string         `json:"routing_key"`
	MessageCount uint64         `json:"message_count"`
	Properties   map[string]any `json:"properties"`
}

// getAckModes maps RabbitMQ's ackmode to basic.get's no-ack and what is
// done with each message got: rejected (with requeue) or not.
var getAckModes = map[string]struct{ noAck, reject, requeue bool }{
	"ack_requeue_false":    {noAck: true},
	"ack_requeue_true":     {},
	"reject_requeue_true":  {reject: true, requeue: true},
	"reject_requeue_false": {reject: true},
}

// getMax bounds count: each message got is held in the response.
const getMax = 10000

// get is RabbitMQ's rabbit_mgmt_wm_queue_get: count basic.gets on a direct
// channel of the requesting user, the rejects the ackmode asks for once
// all are got (rejecting each at once would get the same message again),
// then the channel is closed, which requeues what is still unacked.
//
// Unlike RabbitMQ, which builds the whole answer first, each message is
// encoded and written as it is got, so a request holds one message at a
// time however many it asks for and however large they are. truncate
// (RabbitMQ's: payload cut to that many bytes before encoding,
// payload_bytes still the full size) shrinks what goes out. Once the first
// message is out the status is sent: a failure after that aborts the
// response (the client sees a broken body, never a short list that looks
// whole), and closing the channel requeues whatever was got with an ack
// pending.
func (m *mgmt) get(c *mgmtCall) {
	vh, queueName, ok := m.queueParam(c)
	if !ok {
		return
	}
	var body struct {
		Count    *flexInt `json:"count"`
		AckMode  string   `json:"ackmode"`
		Encoding string   `json:"encoding"`
		Truncate *flexInt `json:"truncate"`
	}
	if !readBody(c, &body) {
		return
	}
	if refuseMissing(c.w, bodyKey{"count", body.Count != nil}, bodyKey{"ackmode", body.AckMode != ""},
		bodyKey{"encoding", body.Encoding != ""}) {
		return
	}
	mode, ok := getAckModes[body.AckMode]
	if !ok {
		WriteError(c.w, http.StatusBadRequest, "bad_request", fmt.Sprintf("unknown ackmode %q", body.AckMode))
		return
	}
	if body.Encoding != "auto" && body.Encoding != "base64" {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "Unsupported encoding. Please use auto or base64.")
		return
	}
	// As RabbitMQ's with_channel: a direct connection as the requesting
	// user, with that user's permissions.
	ch, err := m.b.OpenChannel(c.r.Context(), c.user, vh)
	if err != nil {
		writeChannelError(c.w, err)
		return
	}
	defer ch.Close()
	n := min(max(int(*body.Count), 0), getMax)
	var out *bufio.Writer // set once the first message is out
	fail := func(err error) {
		if out == nil {
			writeAMQPError(c.w, fromAMQP091Error(err))
			return
		}
		_ = ch.Close() // requeues what is unacked before the client hears
		panic(http.ErrAbortHandler)
	}
	var tags []uint64
	for range n {
		d, ok, err := ch.Get(queueName, mode.noAck)
		if err != nil {
			fail(err)
			return
		}
		if !ok {
			break
		}
		tags = append(tags, d.DeliveryTag)
		if out == nil {
			c.w.Header().Set("Content-Type", "application/json")
			c.w.WriteHeader(http.StatusOK)
			out = bufio.NewWriterSize(c.w, 32<<10)
			out.WriteByte('[')
		} else {
			out.WriteByte(',')
		}
		payload := d.Body
		if tr := body.Truncate; tr != nil && *tr >= 0 && len(payload) > int(*tr) {
			payload = payload[:*tr]
		}
		writeGetResult(out, getResult{
			PayloadBytes: len(d.Body), Redelivered: d.Redelivered,
			Exchange: d.Exchange, RoutingKey: d.RoutingKey, MessageCount: uint64(d.MessageCount),
			Properties: propertiesJSON(amqpconv.DeliveryPublishing(&d)),
		}, payload, body.Encoding == "auto" && utf8.Valid(payload))
	}
	if mode.reject {
		for _, tag := range tags {
			if err := ch.Reject(tag, mode.requeue); err != nil {
				fail(err)
				return
			}
		}
	}
	// Closing requeues what ack_requeue_true left unacked, before the
	// response is complete: a client that reacts to it finds them back.
	if err := ch.Close(); err != nil {
		fail(err)
		return
	}
	if out == nil {
		writeJSON(c.w, http.StatusOK, []getResult{})
		return
	}
	out.WriteByte(']')
	_ = out.Flush()
}

// writeGetResult writes one message of a get's answer: r's fields, then
// the payload as a JSON string (asString: it is valid UTF-8 and encoding
// is auto) or in base64, encoded straight into w so that no second copy of
// a large payload is made. Write errors are the client's going away; the
// get finishes and its channel's close settles the messages.
func writeGetResult(w *bufio.Writer, r getResult, payload []byte, asString bool) {
	head, _ := json.Marshal(r) // plain fields and a properties map: cannot fail
	w.Write(head[:len(head)-1])
	w.WriteString(`,"payload":"`)
	if asString {
		writeJSONStringBody(w, payload)
		w.WriteString(`","payload_encoding":"string"}`)
		return
	}
	enc := base64.NewEncoder(base64.StdEncoding, w)
	enc.Write(payload)
	enc.Close()
	w.WriteString(`","payload_encoding":"base64"}`)
}

// writeJSONStringBody writes valid UTF-8 s as the inside of a JSON string:
// quote, backslash and control characters escaped, and U+2028 and U+2029
// too, as encoding/json does, for readers that are JavaScript.
func writeJSONStringBody(w *bufio.Writer, s []byte) {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' && b < utf8.RuneSelf {
			i++
			continue
		}
		if b >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
			w.Write(s[start:i])
			w.WriteString(`\u202`)
			w.WriteByte(hex[r&0xf])
			i += size
			start = i
			continue
		}
		w.Write(s[start:i])
		switch b {
		case '"', '\\':
			w.WriteByte('\\')
			w.WriteByte(b)
		case '\n':
			w.WriteString(`\n`)
		case '\r':
			w.WriteString(`\r`)
		case '\t':
			w.WriteString(`\t`)
		default:
			w.WriteString(`\u00`)
			w.WriteByte(hex[b>>4])
			w.WriteByte(hex[b&0xf])
		}
		i++
		start = i
	}
	w.Write(s[start:])
}

// propertiesJSON lists the properties a publisher set, with RabbitMQ's
// names.
func propertiesJSON(p amqp091.Publishing) map[string]any {
	out := map[string]any{}
	set := func(k string, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("content_type", p.ContentType)
	set("content_encoding", p.ContentEncoding)
	set("correlation_id", p.CorrelationId)
	set("reply_to", p.ReplyTo)
	set("expiration", p.Expiration)
	set("message_id", p.MessageId)
	set("type", p.Type)
	set("user_id", p.UserId)
	set("app_id", p.AppId)
	if p.DeliveryMode != 0 {
		out["delivery_mode"] = p.DeliveryMode
	}
	if p.Priority != 0 {
		out["priority"] = p.Priority
	}
	if !p.Timestamp.IsZero() {
		out["timestamp"] = p.Timestamp.Unix()
	}
	if len(p.Headers) > 0 {
		h := make(amqp.Table, len(p.Headers))
		for k, v := range p.Headers {
			h[k] = v
		}
		out["headers"] = definitions.TableJSON(h)
	}
	return out
}
