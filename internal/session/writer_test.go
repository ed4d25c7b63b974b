package session

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
)

func TestSendContentSplitsByFrameMax(t *testing.T) {
	cases := []struct {
		name     string
		frameMax uint32
		size     int
		want     []int // body frame payload sizes
	}{
		{"empty", 4096, 0, nil},
		{"fits", 4096, 4088, []int{4088}},
		{"one over", 4096, 4089, []int{4088, 1}},
		{"several", 4096, 10000, []int{4088, 4088, 1824}},
		{"large frame-max", 131072, 10000, []int{10000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newOpenConn(t)
			c.frameMax.Store(tc.frameMax)
			body := bytes.Repeat([]byte{'b'}, tc.size)
			props := (&amqp.Properties{MessageID: "m1"}).Append(nil)
			c.sendContent(7, &amqp.BasicDeliver{ConsumerTag: "c", DeliveryTag: 1, RoutingKey: "k"}, props, body)

			frames := takeOut(t, c)
			require.Len(t, frames, 2+len(tc.want))
			require.Equal(t, amqp.FrameMethod, frames[0].Type)
			m, err := amqp.DecodeMethod(frames[0].Payload)
			require.NoError(t, err)
			require.Equal(t, &amqp.BasicDeliver{ConsumerTag: "c", DeliveryTag: 1, RoutingKey: "k"}, m)

			require.Equal(t, amqp.FrameHeader, frames[1].Type)
			h, err := amqp.ParseContentHeader(frames[1].Payload)
			require.NoError(t, err)
			require.Equal(t, amqp.ClassBasic, h.ClassID)
			require.Equal(t, uint64(tc.size), h.BodySize)
			require.Equal(t, props, h.Properties)

			var got []byte
			for i, n := range tc.want {
				f := frames[2+i]
				require.Equal(t, amqp.FrameBody, f.Type)
				require.Equal(t, uint16(7), f.Channel)
				require.Len(t, f.Payload, n)
				require.LessOrEqual(t, len(f.Payload)+8, int(tc.frameMax))
				got = append(got, f.Payload...)
			}
			require.Equal(t, tc.size, len(got))
		})
	}
}

// TestConcurrentSendersNeverInterleaveMessages: many goroutines (as queue
// actors will) send multi-frame messages on their own channels at once; on
// the wire each message's frames are contiguous.
func TestConcurrentSendersNeverInterleaveMessages(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Handshake() // frame-max 8192

	const senders, perSender = 8, 50
	body := bytes.Repeat([]byte("0123456789"), 2000) // 20000 bytes: 3 body frames
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := uint16(s + 1)
			for i := range perSender {
				props := (&amqp.Properties{MessageID: fmt.Sprint(i)}).Append(nil)
				p.conn.sendContent(ch, &amqp.BasicDeliver{DeliveryTag: uint64(i + 1)}, props, body)
			}
		}()
	}

	expectMessages(t, p, senders*perSender, body, func(m amqp.Method) (uint64, bool) {
		d, ok := m.(*amqp.BasicDeliver)
		if !ok {
			return 0, false
		}
		return d.DeliveryTag, true
	})
	wg.Wait()
}

// expectMessages reads n content messages from p and checks that each
// channel's delivery tags (tag reads one from the method, false when the
// method is not the expected kind) run 1, 2, ... and that the frames of
// one message are contiguous and carry body.
func expectMessages(t *testing.T, p *peer, n int, body []byte, tag func(amqp.Method) (uint64, bool)) {
	t.Helper()
	next := make(map[uint16]uint64) // last delivery tag per channel
	for range n {
		f := p.ReadFrame()
		require.Equal(t, amqp.FrameMethod, f.Type)
		m, err := amqp.DecodeMethod(f.Payload)
		require.NoError(t, err)
		dt, ok := tag(m)
		require.True(t, ok, "unexpected %T", m)
		require.Equal(t, next[f.Channel]+1, dt, "per-channel order")
		next[f.Channel] = dt

		hf := p.ReadFrame()
		require.Equal(t, amqp.FrameHeader, hf.Type)
		require.Equal(t, f.Channel, hf.Channel)
		var got []byte
		for len(got) < len(body) {
			bf := p.ReadFrame()
			require.Equal(t, amqp.FrameBody, bf.Type)
			require.Equal(t, f.Channel, bf.Channel, "frames of one message are contiguous")
			got = append(got, bf.Payload...)
		}
		require.Equal(t, body, got)
	}
}

// TestWriterStopsAfterWriteError: when the peer goes away, senders do not
// block or grow the outbox, and Serve returns.
func TestWriterStopsAfterWriteError(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Handshake()
	p.Conn.Close()
	require.Error(t, p.serveResult())
	p.conn.sendMethod(1, &amqp.ChannelOpenOk{})
	p.conn.out.Lock()
	defer p.conn.out.Unlock()
	require.True(t, p.conn.out.stopped)
	require.Empty(t, p.conn.out.buf)
}

// discardRWC accepts every write and blocks reads until closed.
type discardRWC struct {
	closed chan struct{}
	once   sync.Once
}

func newDiscardRWC() *discardRWC { return &discardRWC{closed: make(chan struct{})} }

func (d *discardRWC) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardRWC) Read([]byte) (int, error) {
	<-d.closed
	return 0, io.EOF
}
func (d *discardRWC) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}

// benchWriter is a Conn whose writer writes to a discard stream; stop
// ends it.
func benchWriter(b *testing.B) (c *Conn, stop func()) {
	c = NewConn(newDiscardRWC(), "bench#1", testConfig())
	c.frameMax.Store(131072)
	return c, func() {
		c.stopWriter()
		c.closeRWC()
	}
}

// BenchmarkEncodeContent measures what a sender pays under the outbox lock:
// encoding a delivery's method, header and body frames into the buffer
// (reset after each op, as the writer's swap does).
func BenchmarkEncodeContent(b *testing.B) {
	for _, size := range []int{64, 4096, 65536, 1 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			c := NewConn(newDiscardRWC(), "bench#1", testConfig())
			defer c.closeRWC()
			c.frameMax.Store(131072)
			body := bytes.Repeat([]byte{'x'}, size)
			props := (&amqp.Properties{ContentType: "text/plain", DeliveryMode: 2}).Append(nil)
			m := &amqp.BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 1, Exchange: "ex", RoutingKey: "rk"}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				c.queueContent(1, m, props, body)
				c.out.Lock()
				c.out.buf = c.out.buf[:0]
				c.out.Unlock()
			}
		})
	}
}

// BenchmarkSendContent is the whole path with the writer goroutine running:
// the sender never waits, so when it outruns the writer the outbox grows
// (no bound on pending bytes yet) and B/op shows the regrowth.
func BenchmarkSendContent(b *testing.B) {
	for _, size := range []int{64, 4096, 65536, 1 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			c, stop := benchWriter(b)
			defer stop()
			body := bytes.Repeat([]byte{'x'}, size)
			props := (&amqp.Properties{ContentType: "text/plain", DeliveryMode: 2}).Append(nil)
			m := &amqp.BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 1, Exchange: "ex", RoutingKey: "rk"}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				c.sendContent(1, m, props, body)
			}
		})
	}
}

func BenchmarkSendMethod(b *testing.B) {
	c, stop := benchWriter(b)
	defer stop()
	m := &amqp.BasicAck{DeliveryTag: 42}
	b.ReportAllocs()
	for b.Loop() {
		c.sendMethod(1, m)
	}
}

// BenchmarkHandleFrame measures the reader's dispatch of a method that
// needs no reply allocation beyond decoding (channel.flow).
func BenchmarkHandleFrame(b *testing.B) {
	c, stop := benchWriter(b)
	defer stop()
	c.state.Store(int32(stateOpen))
	c.channelMax = 16
	if err := c.handleFrame(methodFrame(1, &amqp.ChannelOpen{})); err != nil {
		b.Fatal(err)
	}
	f := methodFrame(1, &amqp.ChannelFlow{Active: true})
	b.ReportAllocs()
	for b.Loop() {
		if err := c.handleFrame(f); err != nil {
			b.Fatal(err)
		}
	}
}

// fillOutbox queues 64 KiB deliveries on channel 1 until the outbox is at
// maxPending; the peer is not reading, so the writer is stuck in Write (a
// net.Pipe write waits for the reader). It returns how many it queued.
func fillOutbox(t *testing.T, c *Conn, notify func()) int {
	t.Helper()
	body := bytes.Repeat([]byte{'x'}, 64<<10)
	n := 0
	for c.hasRoom(notify) {
		c.sendContent(1, &amqp.BasicDeliver{DeliveryTag: uint64(n + 1)}, nil, body)
		n++
		require.Less(t, n, 2*maxPending/len(body), "the outbox never reports full")
	}
	return n
}

// TestOutboxBound: once a client stops reading, hasRoom refuses at
// maxPending and the reader stops; when the client reads again, the
// callbacks run, the reader resumes, and every queued frame arrives.
func TestOutboxBound(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Handshake()
	p.OpenChannel(1)

	kicked := make(chan struct{})
	n := fillOutbox(t, p.conn, func() { close(kicked) })
	p.conn.out.Lock()
	pending := p.conn.out.pendingLocked()
	p.conn.out.Unlock()
	require.GreaterOrEqual(t, pending, maxPending)
	require.Less(t, pending, maxPending+70<<10, "producers stop at the bound")

	waited := make(chan struct{})
	go func() {
		p.conn.waitForRoom()
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("waitForRoom returned while the outbox is full")
	case <-kicked:
		t.Fatal("notified while the outbox is full")
	default:
	}

	// The client reads again: every delivery arrives, in order.
	for i := range n {
		m := p.ExpectMethod(1)
		require.Equal(t, uint64(i+1), m.(*amqp.BasicDeliver).DeliveryTag)
		require.Equal(t, amqp.FrameHeader, p.ReadFrame().Type)
		for got := 0; got < 64<<10; {
			f := p.ReadFrame()
			require.Equal(t, amqp.FrameBody, f.Type)
			got += len(f.Payload)
		}
	}
	<-kicked
	<-waited
	require.True(t, p.conn.hasRoom(nil))

	// The reader was never stuck for good: the connection still answers.
	p.OpenChannel(2)
}

// TestOutboxBoundReleasedOnStop: a client that never reads again and
// hangs up releases the waiting reader and runs the callbacks, so queues
// waiting to deliver learn the connection is gone.
func TestOutboxBoundReleasedOnStop(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Handshake()
	p.OpenChannel(1)

	kicked := make(chan struct{})
	fillOutbox(t, p.conn, func() { close(kicked) })
	waited := make(chan struct{})
	go func() {
		p.conn.waitForRoom()
		close(waited)
	}()
	p.Conn.Close()
	<-kicked
	<-waited
	require.Error(t, p.serveResult())
	require.True(t, p.conn.hasRoom(nil), "a stopped connection refuses nothing: sends are dropped")
}

// BenchmarkSendContentBounded is BenchmarkSendContent with the producer
// honouring the outbox bound, as the delivery path does: it waits for the
// writer's callback whenever hasRoom says no, so the outbox never regrows
// past maxPending and the writer's two buffers are reused.
func BenchmarkSendContentBounded(b *testing.B) {
	for _, size := range []int{64, 4096, 65536} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			c, stop := benchWriter(b)
			defer stop()
			body := bytes.Repeat([]byte{'x'}, size)
			props := (&amqp.Properties{ContentType: "text/plain", DeliveryMode: 2}).Append(nil)
			m := &amqp.BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 1, Exchange: "ex", RoutingKey: "rk"}
			room := make(chan struct{}, 1)
			notify := func() {
				select {
				case room <- struct{}{}:
				default:
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				for !c.hasRoom(notify) {
					<-room
				}
				c.sendContent(1, m, props, body)
			}
		})
	}
}

// startTCPPeer is startPeer over a loopback TCP connection, where flushNow
// writes on the caller's goroutine.
func startTCPPeer(t *testing.T, cfg *Config) *peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server, err := ln.Accept()
	require.NoError(t, err)
	p := &peer{RawClient: amqptest.NewRawClient(t, client), conn: NewConn(server, "test#1", cfg), done: make(chan error, 1)}
	go func() { p.done <- p.conn.Serve() }()
	t.Cleanup(func() {
		client.Close()
		<-p.done
	})
	return p
}

// TestFlushNowNeverInterleaves: senders that write in place (flushNow, as
// basic.get does) and senders that leave it to the writer share one
// socket; every message arrives whole and in per-channel order.
func TestFlushNowNeverInterleaves(t *testing.T) {
	p := startTCPPeer(t, testConfig())
	p.Handshake() // frame-max 8192

	const senders, perSender = 8, 100
	body := bytes.Repeat([]byte("0123456789"), 1000) // 10000 bytes: 2 body frames
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := uint16(s + 1)
			for i := range perSender {
				props := (&amqp.Properties{MessageID: fmt.Sprint(i)}).Append(nil)
				p.conn.sendContent(ch, &amqp.BasicGetOk{DeliveryTag: uint64(i + 1)}, props, body)
				if s%2 == 0 {
					p.conn.flushNow()
				}
			}
		}()
	}

	expectMessages(t, p, senders*perSender, body, func(m amqp.Method) (uint64, bool) {
		g, ok := m.(*amqp.BasicGetOk)
		if !ok {
			return 0, false
		}
		return g.DeliveryTag, true
	})
	wg.Wait()
}

// TestFlushNowAfterWriteError: a failed in-place write stops the outbox as
// the writer's would, and Serve returns.
func TestFlushNowAfterWriteError(t *testing.T) {
	p := startTCPPeer(t, testConfig())
	p.Handshake()
	p.Conn.Close()
	require.Error(t, p.serveResult())
	p.conn.sendMethod(1, &amqp.BasicGetEmpty{})
	p.conn.flushNow()
	p.conn.out.Lock()
	defer p.conn.out.Unlock()
	require.True(t, p.conn.out.stopped)
	require.False(t, p.conn.out.flushing)
	require.Empty(t, p.conn.out.buf)
}

// recordingRWC records every Write and fails the test when two overlap;
// every few writes it stalls a little, so producers queue behind a
// writer that is still writing. Reads block until closed.
type recordingRWC struct {
	t        *testing.T
	mu       sync.Mutex
	got      []byte
	writes   int
	inWrite  atomic.Int32
	closed   chan struct{}
	closeOne sync.Once
}

func (r *recordingRWC) Write(p []byte) (int, error) {
	if r.inWrite.Add(1) != 1 {
		r.t.Errorf("two writes at once")
	}
	defer r.inWrite.Add(-1)
	r.mu.Lock()
	r.got = append(r.got, p...)
	r.writes++
	stall := r.writes%7 == 0
	r.mu.Unlock()
	if stall {
		time.Sleep(50 * time.Microsecond)
	}
	return len(p), nil
}

func (r *recordingRWC) Read([]byte) (int, error) {
	<-r.closed
	return 0, io.EOF
}

func (r *recordingRWC) Close() error {
	r.closeOne.Do(func() { close(r.closed) })
	return nil
}

// TestWriterStartsOnDemand hammers the writer that runs only while there
// is something to write: in each round, senders on several goroutines
// queue methods and whole messages (some without waking the writer, then
// waking it once, as a queue's batch does) while the writer starts, writes
// and exits; between rounds the writer must be gone. Every frame must
// arrive exactly once, in each sender's order, with the frames of one
// message together, and no two writes may overlap. Run it with -race.
func TestWriterStartsOnDemand(t *testing.T) {
	rwc := &recordingRWC{t: t, closed: make(chan struct{})}
	c := NewConn(rwc, "hammer#1", testConfig())
	c.frameMax.Store(4096)
	defer c.closeRWC()

	const rounds, senders, perRound = 50, 6, 40
	body := bytes.Repeat([]byte("x"), 5000) // two body frames at frame-max 4096
	var sent [senders]uint64
	for range rounds {
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				ch := uint16(s + 1)
				for range perRound {
					sent[s]++
					switch sent[s] % 3 {
					case 0:
						c.sendMethod(ch, &amqp.BasicAck{DeliveryTag: sent[s]})
					case 1:
						c.sendContent(ch, &amqp.BasicDeliver{DeliveryTag: sent[s]}, nil, body)
					case 2:
						c.queueContent(ch, &amqp.BasicDeliver{DeliveryTag: sent[s]}, nil, body)
						c.poke()
					}
					if sent[s]%5 == 0 {
						runtime.Gosched()
					}
				}
			})
		}
		wg.Wait()
		amqptest.Poll(t, func() bool {
			c.out.Lock()
			defer c.out.Unlock()
			return !c.out.flushing
		}, "the writer exits once the outbox is empty")
		c.out.Lock()
		require.Empty(t, c.out.buf, "an exited writer left frames behind")
		c.out.Unlock()
	}
	c.stopWriter()

	rwc.mu.Lock()
	defer rwc.mu.Unlock()
	require.Greater(t, rwc.writes, rounds, "the writer started again in every round")
	fr := amqp.NewFrameReader(bytes.NewReader(rwc.got))
	var last [senders + 1]uint64
	for n := 0; n < senders*rounds*perRound; n++ {
		f, err := fr.ReadFrame()
		require.NoError(t, err)
		require.Equal(t, amqp.FrameMethod, f.Type)
		m, err := amqp.DecodeMethod(f.Payload)
		require.NoError(t, err)
		var tag uint64
		switch m := m.(type) {
		case *amqp.BasicAck:
			tag = m.DeliveryTag
		case *amqp.BasicDeliver:
			tag = m.DeliveryTag
			var got int
			for hdr := true; hdr || got < len(body); hdr = false {
				cf, err := fr.ReadFrame()
				require.NoError(t, err)
				require.Equal(t, f.Channel, cf.Channel, "frames of one message are together")
				if !hdr {
					got += len(cf.Payload)
				}
			}
		default:
			t.Fatalf("unexpected %T", m)
		}
		require.Equal(t, last[f.Channel]+1, tag, "channel %d in order", f.Channel)
		last[f.Channel] = tag
	}
	_, err := fr.ReadFrame()
	require.ErrorIs(t, err, io.EOF, "nothing written twice")
}

// TestIdleConnHasNoWriter: once a served connection has written what it
// had, its writer goroutine is gone, and the next frame starts one again.
func TestIdleConnHasNoWriter(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Handshake()
	writerGone := func() bool {
		p.conn.out.Lock()
		defer p.conn.out.Unlock()
		return !p.conn.out.flushing
	}
	amqptest.Poll(t, writerGone, "the writer exits when the connection is idle")
	p.SendMethod(1, &amqp.ChannelOpen{})
	_, ok := p.ExpectMethod(1).(*amqp.ChannelOpenOk)
	require.True(t, ok)
	amqptest.Poll(t, writerGone, "and again after the reply")
}

// TestFlushQueuedWritesInPlace: a lone delivery a queue flushes over TCP
// to an idle connection is on the wire when flushQueued returns, written
// by the caller in the writer's turn, which it gives back; on a connection
// that has just written it is left to the writer.
func TestFlushQueuedWritesInPlace(t *testing.T) {
	p := startTCPPeer(t, testConfig())
	p.Handshake()
	c := p.conn
	c.out.Lock()
	c.waitFlushedLocked()                       // open-ok is out
	c.out.lastWrite = sinceStart() - busyWindow // idle since
	c.out.Unlock()
	sent := c.tr.Stats().Sent
	body := []byte("hello")
	require.True(t, c.queueContent(1, &amqp.BasicDeliver{ConsumerTag: "c", DeliveryTag: 1}, nil, body))
	c.out.Lock()
	queued := len(c.out.buf)
	c.out.Unlock()
	c.flushQueued()
	require.Equal(t, sent+uint64(queued), c.tr.Stats().Sent, "written by flushQueued itself")
	c.out.Lock()
	require.False(t, c.out.flushing)
	require.Empty(t, c.out.buf)
	c.out.Unlock()
	expectMessages(t, p, 1, body, deliveryTag)
}

// TestFlushQueuedInPlaceOnlyWhenIdle: flushQueued writes in place only
// what it can write at once to a connection nobody writes to and that has
// not written within busyWindow; the rest is the writer's.
func TestFlushQueuedInPlaceOnlyWhenIdle(t *testing.T) {
	const now = time.Hour
	idle := func() *outbox {
		return &outbox{buf: make([]byte, 100), lastWrite: now - busyWindow}
	}
	for _, tc := range []struct {
		name string
		set  func(o *outbox)
		want bool
	}{
		{"idle", func(*outbox) {}, true},
		{"wrote just now", func(o *outbox) { o.lastWrite = now - busyWindow + 1 }, false},
		{"flushing", func(o *outbox) { o.flushing = true }, false},
		{"writing", func(o *outbox) { o.writing = 10 }, false},
		{"stopped", func(o *outbox) { o.stopped = true }, false},
		{"half-closing", func(o *outbox) { o.halfClose = true }, false},
		{"nothing queued", func(o *outbox) { o.buf = nil }, false},
		{"too much queued", func(o *outbox) { o.buf = make([]byte, flushNowMax+1) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := idle()
			tc.set(o)
			require.Equal(t, tc.want, o.inPlaceLocked(now))
		})
	}
}

// TestFlushQueuedOnAFullSocket: when the socket takes only part of the
// batch (the client is not reading), the rest goes to the writer ahead of
// what was queued meanwhile, and everything arrives whole and in order.
func TestFlushQueuedOnAFullSocket(t *testing.T) {
	p := startTCPPeer(t, testConfig())
	p.Handshake() // frame-max 8192
	c := p.conn
	c.out.Lock()
	c.waitFlushedLocked()
	c.out.flushing = true // the writer's turn, while the socket fills
	c.out.Unlock()
	junk := make([]byte, 64<<10)
	total := 0
	for { // fill most of the socket: the client reads nothing yet
		n, err := c.tryWrite.TryWrite(junk)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		total += n
		require.Less(t, total, 64<<20, "the socket never filled")
	}
	c.out.Lock()
	c.out.endFlushLocked()
	c.out.lastWrite = sinceStart() - busyWindow
	c.out.Unlock()

	body := bytes.Repeat([]byte("x"), 6000)
	const n = 20
	for i := range n {
		require.True(t, c.queueContent(1, &amqp.BasicDeliver{ConsumerTag: "c", DeliveryTag: uint64(i + 1)}, nil, body))
		c.flushQueued()
	}
	got := make([]byte, total)
	_, err := io.ReadFull(p.Conn, got)
	require.NoError(t, err)
	expectMessages(t, p, n, body, deliveryTag)
	c.out.Lock()
	c.waitFlushedLocked()
	require.Empty(t, c.out.buf)
	c.out.Unlock()
}

// TestFlushQueuedNeverInterleaves: queue goroutines flushing lone
// deliveries in place and senders leaving theirs to the writer share one
// socket; every message arrives whole and in per-channel order.
func TestFlushQueuedNeverInterleaves(t *testing.T) {
	p := startTCPPeer(t, testConfig())
	p.Handshake()
	const senders, perSender = 8, 100
	body := bytes.Repeat([]byte("0123456789"), 1000) // 2 body frames
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := uint16(s + 1)
			for i := range perSender {
				d := &amqp.BasicDeliver{ConsumerTag: "c", DeliveryTag: uint64(i + 1)}
				if s%2 == 0 {
					p.conn.queueContent(ch, d, nil, body)
					p.conn.flushQueued()
				} else {
					p.conn.sendContent(ch, d, nil, body)
				}
			}
		}()
	}
	expectMessages(t, p, senders*perSender, body, deliveryTag)
	wg.Wait()
}

// deliveryTag is expectMessages' tag for basic.deliver.
func deliveryTag(m amqp.Method) (uint64, bool) {
	d, ok := m.(*amqp.BasicDeliver)
	if !ok {
		return 0, false
	}
	return d.DeliveryTag, true
}
