package shovel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Ack modes, as RabbitMQ spells them.
const (
	OnConfirm = "on-confirm"
	OnPublish = "on-publish"
	NoAck     = "no-ack"
)

// Delete-after modes other than a count.
const (
	Never       = "never"
	QueueLength = "queue-length"
)

// Defaults of rabbit_shovel_parameters (RabbitMQ 3.10).
const (
	DefaultPrefetch       = 1000
	DefaultReconnectDelay = 5 * time.Second
)

// Def is one validated shovel definition with RabbitMQ's defaults filled in.
type Def struct {
	SrcURIs        []string
	SrcQueue       string // one of SrcQueue, SrcExchange is set
	SrcExchange    string
	SrcExchangeKey string
	DestURIs       []string
	DestQueue      string
	DestExchange   string
	DestKey        string // dest-exchange-key; "" with HasDestKey false keeps the message's key
	HasDestKey     bool
	AckMode        string
	// DeleteAfter is Never, QueueLength or "" with DeleteCount set.
	DeleteAfter       string
	DeleteCount       int64
	Prefetch          int
	ReconnectDelay    time.Duration
	AddForwardHeaders bool
	AddTimestamp      bool
	PublishProperties map[string]any
	// SrcConsumerArgs are src-consumer-args, the arguments of the source
	// consumer (RabbitMQ's "Move messages" sets x-stream-offset first on
	// a stream), with JSON numbers as int64 or float64.
	SrcConsumerArgs map[string]any
}

// keys lists every key Parse accepts and what it must hold; any other key
// is refused, as rabbit_parameter_validation:proplist does.
var keys = map[string]string{
	"src-protocol": "string", "src-uri": "uri", "src-queue": "string",
	"src-exchange": "string", "src-exchange-key": "string",
	"src-prefetch-count": "number", "prefetch-count": "number",
	"src-delete-after": "delete", "delete-after": "delete",
	"dest-protocol": "string", "dest-uri": "uri", "dest-queue": "string",
	"dest-exchange": "string", "dest-exchange-key": "string",
	"ack-mode": "ack", "reconnect-delay": "number",
	"add-forward-headers": "bool", "dest-add-forward-headers": "bool",
	"dest-add-timestamp-header": "bool", "dest-publish-properties": "object",
	"src-queue-args": "object", "dest-queue-args": "object", "src-consumer-args": "object",
}

// Parse validates the JSON value of a shovel parameter and returns it with
// defaults applied. Errors carry RabbitMQ's texts, so the management API can
// answer with them in its 400 body.
func Parse(value []byte) (Def, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return Def{}, fmt.Errorf("shovel definition must be a JSON object")
	}
	raw := map[string]any{}
	for k, v := range m {
		kind, ok := keys[k]
		if !ok {
			return Def{}, fmt.Errorf("Unrecognised terms [<<%q>>] in %s", k, "shovel")
		}
		var x any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&x); err != nil {
			return Def{}, fmt.Errorf("%s: %v", k, err)
		}
		if err := check(k, kind, x); err != nil {
			return Def{}, err
		}
		raw[k] = x
	}
	str := func(k string) string { s, _ := raw[k].(string); return s }
	for _, k := range []string{"src-protocol", "dest-protocol"} {
		if p, ok := raw[k]; ok && p != "amqp091" {
			return Def{}, fmt.Errorf("%s: only amqp091 is supported, got %v", k, p)
		}
	}
	for _, k := range []string{"src-uri", "dest-uri"} {
		if _, ok := raw[k]; !ok {
			return Def{}, fmt.Errorf("Key %q not found in shovel", k)
		}
	}
	_, sq := raw["src-queue"]
	_, sx := raw["src-exchange"]
	switch {
	case !sq && !sx:
		return Def{}, fmt.Errorf("Must specify 'src-exchange' or 'src-queue'")
	case sq && sx:
		return Def{}, fmt.Errorf("Cannot specify 'src-exchange' and 'src-queue'")
	}
	_, dq := raw["dest-queue"]
	_, dx := raw["dest-exchange"]
	if dq && dx {
		return Def{}, fmt.Errorf("Cannot specify 'dest-exchange' and 'dest-queue'")
	}
	d := Def{
		SrcURIs: uris(raw["src-uri"]), DestURIs: uris(raw["dest-uri"]),
		SrcQueue: str("src-queue"), SrcExchange: str("src-exchange"),
		SrcExchangeKey: str("src-exchange-key"),
		DestQueue:      str("dest-queue"), DestExchange: str("dest-exchange"),
		AckMode: OnConfirm, DeleteAfter: Never,
		Prefetch: DefaultPrefetch, ReconnectDelay: DefaultReconnectDelay,
	}
	if k, ok := raw["dest-exchange-key"].(string); ok && !dq {
		d.DestKey, d.HasDestKey = k, true
	}
	if a, ok := raw["ack-mode"].(string); ok {
		d.AckMode = a
	}
	// The 3.10 names win over the pre-3.7 ones when both are given.
	for _, k := range []string{"delete-after", "src-delete-after"} {
		switch v := raw[k].(type) {
		case string:
			d.DeleteAfter, d.DeleteCount = v, 0
		case json.Number:
			n, _ := v.Int64()
			d.DeleteAfter, d.DeleteCount = "", n
		}
	}
	if d.DeleteAfter == "" && d.AckMode == NoAck {
		return Def{}, fmt.Errorf("Cannot specify 'no-ack' and numerical 'delete-after'")
	}
	for _, k := range []string{"prefetch-count", "src-prefetch-count"} {
		if v, ok := raw[k].(json.Number); ok {
			n, err := v.Int64()
			if err != nil || n < 1 || n > 65535 {
				return Def{}, fmt.Errorf("%s should be an integer between 1 and 65535, actually was %s", k, v)
			}
			d.Prefetch = int(n)
		}
	}
	if v, ok := raw["reconnect-delay"].(json.Number); ok {
		f, _ := v.Float64()
		if f < 0 || f > 86400 {
			return Def{}, fmt.Errorf("reconnect-delay should be a number of seconds between 0 and 86400, actually was %s", v)
		}
		d.ReconnectDelay = time.Duration(f * float64(time.Second))
	}
	for _, k := range []string{"add-forward-headers", "dest-add-forward-headers"} {
		if b, ok := raw[k].(bool); ok {
			d.AddForwardHeaders = b
		}
	}
	d.AddTimestamp, _ = raw["dest-add-timestamp-header"].(bool)
	d.PublishProperties, _ = raw["dest-publish-properties"].(map[string]any)
	if a, ok := raw["src-consumer-args"].(map[string]any); ok && len(a) > 0 {
		d.SrcConsumerArgs = tableValues(a).(map[string]any)
	}
	for _, u := range append(append([]string(nil), d.SrcURIs...), d.DestURIs...) {
		if _, err := ParseURI(u); err != nil {
			return Def{}, err
		}
	}
	return d, nil
}

// check is the per-key type test of rabbit_parameter_validation.
func check(k, kind string, x any) error {
	switch kind {
	case "string":
		if _, ok := x.(string); !ok {
			return fmt.Errorf("%s should be binary, actually was %v", k, x)
		}
	case "number":
		if _, ok := x.(json.Number); !ok {
			return fmt.Errorf("%s should be a number, actually was %v", k, x)
		}
	case "bool":
		if _, ok := x.(bool); !ok {
			return fmt.Errorf("%s should be boolean, actually was %v", k, x)
		}
	case "object":
		if _, ok := x.(map[string]any); !ok {
			return fmt.Errorf("%s should be an object, actually was %v", k, x)
		}
	case "ack":
		if s, _ := x.(string); s != OnConfirm && s != OnPublish && s != NoAck {
			return fmt.Errorf("%s should be one of [\"no-ack\",\"on-publish\",\"on-confirm\"], actually was %v", k, x)
		}
	case "delete":
		if s, ok := x.(string); ok && (s == Never || s == QueueLength) {
			return nil
		}
		if n, ok := x.(json.Number); ok {
			if i, err := n.Int64(); err == nil && i >= 0 {
				return nil
			}
		}
		return fmt.Errorf("%s should be a number greater than or equal to 0, \"never\" or \"queue-length\", actually was %v", k, x)
	case "uri":
		switch v := x.(type) {
		case string:
			return nil
		case []any:
			if len(v) == 0 {
				return fmt.Errorf("%s should be a URI or a non-empty list of URIs", k)
			}
			for _, e := range v {
				if _, ok := e.(string); !ok {
					return fmt.Errorf("%s should be a URI or a list of URIs, actually was %v", k, x)
				}
			}
			return nil
		}
		return fmt.Errorf("%s should be a URI or a list of URIs, actually was %v", k, x)
	}
	return nil
}

// tableValues turns decoded JSON into values an AMQP table holds: a
// json.Number becomes an int64 when it is whole, a float64 otherwise.
func tableValues(x any) any {
	switch v := x.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = tableValues(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = tableValues(e)
		}
		return out
	}
	return x
}

func uris(x any) []string {
	if s, ok := x.(string); ok {
		return []string{s}
	}
	var out []string
	for _, e := range x.([]any) {
		out = append(out, e.(string))
	}
	return out
}
