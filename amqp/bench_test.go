package amqp

import (
	"bytes"
	"testing"
)

// loopReader serves the same bytes forever without allocating.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

func BenchmarkReadFrame(b *testing.B) {
	pub := AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "amq.direct", RoutingKey: "orders.created"})
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"method=basic.publish", pub},
		{"body=1KiB", AppendFrame(nil, FrameBody, 1, make([]byte, 1<<10))},
		{"body=128KiB", AppendFrame(nil, FrameBody, 1, make([]byte, 128<<10-8))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// Enough frames back to back that the reader batches them like a socket would.
			stream := bytes.Repeat(tc.frame, max(1, 64<<10/len(tc.frame)))
			fr := NewFrameReader(&loopReader{data: stream})
			fr.SetMaxFrameSize(128 << 10)
			b.SetBytes(int64(len(tc.frame)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fr.ReadFrame(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendMethodFrame(b *testing.B) {
	m := &BasicDeliver{ConsumerTag: "amq.ctag-0123456789abcdef", DeliveryTag: 123456789, Exchange: "amq.direct", RoutingKey: "orders.created"}
	buf := AppendMethodFrame(nil, 1, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendMethodFrame(buf[:0], 1, m)
	}
}

func BenchmarkAppendHeaderFrame(b *testing.B) {
	props := (&Properties{ContentType: "application/json", DeliveryMode: 2, Headers: Table{"x-trace": "abc"}}).Append(nil)
	buf := AppendHeaderFrame(nil, 1, ClassBasic, 1024, props)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendHeaderFrame(buf[:0], 1, ClassBasic, 1024, props)
	}
}

func BenchmarkAppendBodyFrames(b *testing.B) {
	body := make([]byte, 64<<10)
	buf := AppendBodyFrames(nil, 1, body, 128<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendBodyFrames(buf[:0], 1, body, 128<<10)
	}
}

func BenchmarkDecodeArgs(b *testing.B) {
	args := (&BasicPublish{Exchange: "amq.direct", RoutingKey: "orders.created", Mandatory: true}).AppendArgs(nil)
	b.Run("BasicPublish/reused", func(b *testing.B) {
		// A session decodes each publish of a channel into one struct: same exchange
		// and routing key, no allocation.
		var m BasicPublish
		b.SetBytes(int64(len(args)))
		b.ReportAllocs()
		for b.Loop() {
			if err := m.DecodeArgs(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BasicPublish/fresh", func(b *testing.B) {
		b.SetBytes(int64(len(args)))
		b.ReportAllocs()
		for b.Loop() {
			var m BasicPublish
			if err := m.DecodeArgs(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	ack := (&BasicAck{DeliveryTag: 42, Multiple: true}).AppendArgs(nil)
	b.Run("BasicAck", func(b *testing.B) {
		var m BasicAck
		b.SetBytes(int64(len(ack)))
		b.ReportAllocs()
		for b.Loop() {
			if err := m.DecodeArgs(ack); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMethodIDs(b *testing.B) {
	payload := AppendMethod(nil, &BasicAck{DeliveryTag: 42})
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := MethodIDs(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func benchTables() []struct {
	name string
	t    Table
} {
	return []struct {
		name string
		t    Table
	}{
		{"small", Table{"x-message-ttl": int32(60000), "x-dead-letter-exchange": "dlx", "x-queue-type": "classic"}},
		{"nested", Table{
			"x-death": []any{Table{
				"count": int64(1), "exchange": "ex", "queue": "q", "reason": "rejected",
				"routing-keys": []any{"rk"}, "time": int64(1700000000),
			}},
			"x-first-death-queue": "q",
			"capabilities":        Table{"publisher_confirms": true, "basic.nack": true, "consumer_cancel_notify": true},
		}},
	}
}

func BenchmarkAppendTable(b *testing.B) {
	for _, tc := range benchTables() {
		b.Run(tc.name, func(b *testing.B) {
			buf, err := AppendTable(nil, tc.t)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = AppendTable(buf[:0], tc.t)
			}
		})
	}
}

func BenchmarkDecodeTable(b *testing.B) {
	for _, tc := range benchTables() {
		b.Run(tc.name, func(b *testing.B) {
			enc, err := AppendTable(nil, tc.t)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := DecodeTable(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSummarizeProperties(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    Properties
	}{
		{"typical", Properties{ContentType: "application/json", DeliveryMode: 2, Headers: Table{"x-trace": "abc", "n": int32(1)}, MessageID: "m-1"}},
		{"all", allProperties()},
	} {
		raw := tc.p.Append(nil)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := SummarizeProperties(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseContentHeader(b *testing.B) {
	props := (&Properties{ContentType: "application/json", DeliveryMode: 2, Headers: Table{"x-trace": "abc"}}).Append(nil)
	payload := append([]byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0}, props...)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseContentHeader(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProperties(b *testing.B) {
	p := allProperties()
	raw := p.Append(nil)
	b.Run("Append", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		buf := raw
		for b.Loop() {
			buf = p.Append(buf[:0])
		}
	})
	b.Run("Decode", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeProperties(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAppendArgs covers every method's encoder; they should all be 0 allocs.
func BenchmarkAppendArgs(b *testing.B) {
	for _, m := range allMethods() {
		if m.Name() != "basic.deliver" && m.Name() != "basic.ack" && m.Name() != "connection.start" {
			continue
		}
		b.Run(m.Name(), func(b *testing.B) {
			if m.Name() == "connection.start" {
				m = &ConnectionStart{VersionMinor: 9, ServerProperties: Table{"product": "warren", "capabilities": Table{"basic.nack": true}}, Mechanisms: "PLAIN", Locales: "en_US"}
			}
			buf := m.AppendArgs(nil)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = m.AppendArgs(buf[:0])
			}
		})
	}
}

// BenchmarkDeliverLiteral builds the basic.deliver per call, as a session does: through
// the Method interface the struct escapes, through its AppendFrame method it does not.
func BenchmarkDeliverLiteral(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.Run("AppendMethodFrame", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf = AppendMethodFrame(buf[:0], 1, &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: uint64(i), Exchange: "ex", RoutingKey: "rk"})
		}
	})
	b.Run("AppendFrame", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf = (&BasicDeliver{ConsumerTag: "ctag", DeliveryTag: uint64(i), Exchange: "ex", RoutingKey: "rk"}).AppendFrame(buf[:0], 1)
		}
	})
}
