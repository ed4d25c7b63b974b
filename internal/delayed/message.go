package delayed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/warrenmq/broker/amqp"
)

// MaxDelay is the longest x-delay the plugin holds a message for, in
// milliseconds: (2^32)-1, Erlang's longest timer. As in the plugin, a
// longer delay routes the message at once.
const MaxDelay = math.MaxUint32

// Key orders held messages: by due time (Unix nanoseconds), then by the
// sequence number the scheduler gave them, so messages due at the same
// moment route in the order they were published.
type Key struct {
	Due int64
	Seq uint64
}

// Less reports whether k sorts before o.
func (k Key) Less(o Key) bool { return k.Due < o.Due || k.Due == o.Due && k.Seq < o.Seq }

// Message is one held message: where it was published and what, and when
// it is due.
type Message struct {
	Key
	VHost      string
	Exchange   string
	RoutingKey string
	// CC holds the extra routing keys of sender-selected distribution
	// (the CC and BCC headers' keys); Properties have BCC removed already.
	CC         []string
	Properties []byte
	Body       []byte
	Persistent bool
	// Delay is the x-delay the message was published with, in
	// milliseconds; the header is set to -Delay on delivery.
	Delay int64
}

// messageOverhead is what a held message costs in the heap besides its
// strings and slices: the Message struct and its slice headers, the
// memory store's item, heap slot and map entry. TestMessageHeapBytes
// checks it against the live heap.
const messageOverhead = 208

// HeapBytes is what m holds in the heap while held in memory, by the
// estimate the memory alarm counts: its strings, routing keys, properties
// and body, plus messageOverhead.
func (m *Message) HeapBytes() int64 {
	n := int64(messageOverhead + len(m.VHost) + len(m.Exchange) + len(m.RoutingKey) + len(m.Properties) + len(m.Body))
	for _, k := range m.CC {
		n += int64(len(k)) + 16
	}
	return n
}

// ParseDelay reads the x-delay header as rabbitmq-delayed-message-exchange
// (rabbit_delayed_message_utils:get_delay, 4.0) does: an integer of any
// AMQP integer type but the unsigned 64-bit one, a decimal string, or a
// float or decimal truncated towards zero. It reports ok=false, meaning
// "route now", when the header is absent, of another type, a string that
// is not an integer, or when the delay is not in (0, MaxDelay]: the plugin
// routes those messages at once.
func ParseDelay(headers map[string]any) (ms int64, ok bool) {
	v, present := headers["x-delay"]
	if !present {
		return 0, false
	}
	switch v := v.(type) {
	case int8:
		ms = int64(v)
	case int16:
		ms = int64(v)
	case int32:
		ms = int64(v)
	case int64:
		ms = v
	case int:
		ms = int64(v)
	case uint8:
		ms = int64(v)
	case uint16:
		ms = int64(v)
	case uint32:
		ms = int64(v)
	case string:
		n, err := parseErlangInt(v)
		if err != nil {
			return 0, false
		}
		ms = n
	case []byte:
		n, err := parseErlangInt(string(v))
		if err != nil {
			return 0, false
		}
		ms = n
	case float32:
		return truncDelay(float64(v))
	case float64:
		return truncDelay(v)
	case amqp.Decimal:
		f := float64(v.Value) / math.Pow10(int(v.Scale))
		return truncDelay(f)
	default:
		return 0, false
	}
	return ms, ms > 0 && ms <= MaxDelay
}

func truncDelay(f float64) (int64, bool) {
	if math.IsNaN(f) || f < 1 || f >= MaxDelay+1 {
		return 0, false
	}
	return int64(f), true
}

// parseErlangInt is binary_to_integer's grammar: an optional sign and
// decimal digits, nothing else.
func parseErlangInt(s string) (int64, error) {
	if s == "" || strings.TrimLeft(s, "+-0123456789") != "" {
		return 0, errors.New("not an integer")
	}
	return strconv.ParseInt(s, 10, 64)
}

// deliveredHeader is the x-delay value a delivered message carries: the
// delay negated, as the plugin's swap_delay_header sets it, so a message
// that passes through another delayed exchange is not delayed again and a
// consumer can tell it was delayed. A signed 32-bit integer when it fits,
// as the plugin's signedint, else a 64-bit one.
func deliveredHeader(delay int64) any {
	if -delay >= math.MinInt32 {
		return int32(-delay)
	}
	return -delay
}

// SwapDelayHeader returns props with the x-delay header set to the
// negated delay. Properties that do not decode (they did when published)
// are returned as they are.
func SwapDelayHeader(props []byte, delay int64) []byte {
	return amqp.SetHeaders(props, amqp.Table{"x-delay": deliveredHeader(delay)})
}

// recordVersion is the record encoding's version, 1:
//
//	1 byte version, due int64, seq uint64, delay int64, flags byte,
//	then uvarint-length strings: vhost, exchange, routing key,
//	uvarint count of CC keys and each key, properties, body.
const recordVersion = 1

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Encode appends m's stored form to dst.
func (m *Message) Encode(dst []byte) []byte {
	dst = append(dst, recordVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Due))
	dst = binary.BigEndian.AppendUint64(dst, m.Seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Delay))
	var flags byte
	if m.Persistent {
		flags |= 1
	}
	dst = append(dst, flags)
	dst = appendString(dst, m.VHost)
	dst = appendString(dst, m.Exchange)
	dst = appendString(dst, m.RoutingKey)
	dst = binary.AppendUvarint(dst, uint64(len(m.CC)))
	for _, k := range m.CC {
		dst = appendString(dst, k)
	}
	dst = appendBytes(dst, m.Properties)
	return appendBytes(dst, m.Body)
}

// ErrCorrupt is returned (wrapped) for a stored record that does not
// decode.
var ErrCorrupt = errors.New("delayed: corrupt record")

type reader struct {
	b   []byte
	err error
}

func (r *reader) fixed(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.err = ErrCorrupt
		return make([]byte, n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) bytes() []byte {
	if r.err != nil {
		return nil
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k) {
		r.err = ErrCorrupt
		return nil
	}
	out := r.b[k : k+int(n)]
	r.b = r.b[k+int(n):]
	return out
}

// Decode parses a record Encode wrote. The message's byte slices are
// copies: b may be reused by the caller.
func Decode(b []byte) (Message, error) {
	var m Message
	if len(b) == 0 || b[0] != recordVersion {
		return m, fmt.Errorf("%w: unknown version", ErrCorrupt)
	}
	r := reader{b: b[1:]}
	m.Due = int64(binary.BigEndian.Uint64(r.fixed(8)))
	m.Seq = binary.BigEndian.Uint64(r.fixed(8))
	m.Delay = int64(binary.BigEndian.Uint64(r.fixed(8)))
	m.Persistent = r.fixed(1)[0]&1 != 0
	m.VHost = string(r.bytes())
	m.Exchange = string(r.bytes())
	m.RoutingKey = string(r.bytes())
	n, k := binary.Uvarint(r.b)
	if r.err == nil && (k <= 0 || n > uint64(len(r.b))) {
		r.err = ErrCorrupt
	}
	if r.err == nil {
		r.b = r.b[k:]
		for range n {
			m.CC = append(m.CC, string(r.bytes()))
		}
	}
	m.Properties = append([]byte(nil), r.bytes()...)
	m.Body = append([]byte(nil), r.bytes()...)
	if r.err == nil && len(r.b) != 0 {
		r.err = ErrCorrupt
	}
	if r.err != nil {
		return Message{}, fmt.Errorf("%w", r.err)
	}
	return m, nil
}
