package brokertest

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/broker/amqp"
)

// traceLimit bounds the frames kept per connection and direction: a
// failing test wants the last ones, and a long test must not grow
// without bound.
const traceLimit = 500

// tracer keeps the wire trace of every connection of a Lab.
type tracer struct {
	mu    sync.Mutex
	conns []*connTrace
	start time.Time
}

func newTracer() *tracer { return &tracer{start: time.Now()} }

// conn starts the trace of a new connection.
func (tr *tracer) conn(name string) *connTrace {
	c := &connTrace{name: name, start: tr.start}
	tr.mu.Lock()
	tr.conns = append(tr.conns, c)
	tr.mu.Unlock()
	return c
}

// dump logs every connection's trace through t.Log.
func (tr *tracer) dump(t testing.TB) {
	tr.mu.Lock()
	conns := append([]*connTrace(nil), tr.conns...)
	tr.mu.Unlock()
	for _, c := range conns {
		t.Log(c.String())
	}
}

// Trace returns the wire trace of every connection the Lab served so
// far, one block per connection: each frame with the time since the Lab
// started, its direction ("C>" from the client, "S>" from the broker),
// its channel and, for methods, the decoded method. The Lab logs it
// through t.Log when the test fails.
func (l *Lab) Trace() string {
	l.tracer.mu.Lock()
	conns := append([]*connTrace(nil), l.tracer.conns...)
	l.tracer.mu.Unlock()
	var sb strings.Builder
	for _, c := range conns {
		sb.WriteString(c.String())
		sb.WriteByte('\n')
	}
	return sb.String()
}

// connTrace decodes the bytes of one connection into frames.
type connTrace struct {
	name  string
	start time.Time

	mu      sync.Mutex
	in, out parser
	lines   []string
	dropped int
}

// parser splits one direction's byte stream into frames.
type parser struct {
	buf    []byte
	header bool // the protocol header was seen or skipped
	broken bool // the stream stopped making sense: stop decoding
}

// bytes feeds p, read or written, into the direction's parser.
func (c *connTrace) bytes(p []byte, fromClient bool) {
	if c == nil || len(p) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ps, dir := &c.out, "S>"
	if fromClient {
		ps, dir = &c.in, "C>"
	}
	if ps.broken {
		return
	}
	ps.buf = append(ps.buf, p...)
	now := time.Since(c.start)
	if fromClient && !ps.header {
		if len(ps.buf) < 8 {
			return
		}
		if string(ps.buf[:4]) == "AMQP" {
			c.add(fmt.Sprintf("%10.6fs %s protocol header %q", now.Seconds(), dir, ps.buf[:8]))
			ps.buf = ps.buf[8:]
		}
		ps.header = true
	}
	for len(ps.buf) >= 7 {
		typ := ps.buf[0]
		ch := binary.BigEndian.Uint16(ps.buf[1:])
		size := binary.BigEndian.Uint32(ps.buf[3:])
		if size > 1<<29 {
			ps.broken = true
			c.add(fmt.Sprintf("%10.6fs %s undecodable bytes", now.Seconds(), dir))
			return
		}
		end := 7 + int(size) + 1
		if len(ps.buf) < end {
			return
		}
		c.add(fmt.Sprintf("%10.6fs %s ch%d %s", now.Seconds(), dir, ch, describe(typ, ps.buf[7:end-1])))
		ps.buf = ps.buf[end:]
	}
	if len(ps.buf) == 0 {
		ps.buf = nil // let a large body's buffer go
	}
}

func (c *connTrace) add(line string) {
	if len(c.lines) >= 2*traceLimit {
		c.lines = c.lines[1:]
		c.dropped++
	}
	c.lines = append(c.lines, line)
}

// describe decodes one frame for the trace.
func describe(typ uint8, payload []byte) string {
	switch typ {
	case 1:
		m, err := amqp.DecodeMethod(payload)
		if err != nil {
			return fmt.Sprintf("method (undecodable: %v)", err)
		}
		s := fmt.Sprintf("%s %+v", m.Name(), m)
		if len(s) > 240 {
			s = s[:240] + "..."
		}
		return s
	case 2:
		if len(payload) >= 12 {
			return fmt.Sprintf("content header, body %d bytes", binary.BigEndian.Uint64(payload[4:]))
		}
		return "content header"
	case 3:
		return fmt.Sprintf("body %d bytes", len(payload))
	case 8:
		return "heartbeat"
	}
	return fmt.Sprintf("frame type %d, %d bytes", typ, len(payload))
}

func (c *connTrace) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "wire trace of %s (%d frames):", c.name, len(c.lines)+c.dropped)
	if c.dropped > 0 {
		fmt.Fprintf(&sb, "\n  ... %d earlier frames not kept", c.dropped)
	}
	for _, l := range c.lines {
		sb.WriteString("\n  ")
		sb.WriteString(l)
	}
	return sb.String()
}
