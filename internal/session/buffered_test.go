package session

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/measure"
	"github.com/warrenmq/broker/internal/vhost"
)

// TestBodyBufferGrowsWithWhatArrives: a header reserves nothing for its
// body; the buffer grows with the body frames, never past twice what
// arrived nor past the announced size, in a few doublings rather than once
// per frame; while the content waits for more frames it counts as buffered,
// and completing or closing the channel gives that back.
func TestBodyBufferGrowsWithWhatArrives(t *testing.T) {
	props := (&amqp.Properties{ContentType: "text/plain"}).Append(nil)
	const frame = 8000
	payload := strings.Repeat("x", frame)
	cases := []struct {
		name     string
		announce uint64
		frames   int
		complete bool
	}{
		{"128 MiB announced, 1 MB sent", 128 << 20, 128, false},
		{"one frame", frame, 1, true},
		{"three frames", 2*frame + frame/2, 3, true},
		{"forty frames", 40 * frame, 40, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newOpenConn(t)
			alarms := &Alarms{}
			c.alarms = alarms
			require.NoError(t, c.handleFrame(methodFrame(1, &amqp.ChannelOpen{})))
			takeOut(t, c)
			ch := c.channels[1]
			require.NoError(t, ch.handleFrame(methodFrame(1, &amqp.BasicPublish{RoutingKey: "k"})))
			require.NoError(t, ch.handleFrame(headerFrame(1, amqp.ClassBasic, tc.announce, props)))
			require.Zero(t, cap(ch.asm.body))
			require.Zero(t, alarms.Buffered(), "a header alone buffers nothing")

			arrived, growths, lastCap := 0, 0, 0
			for i := range tc.frames {
				b := payload
				if rest := int(tc.announce) - arrived; rest < len(b) {
					b = b[:rest]
				}
				err := ch.handleFrame(bodyFrame(1, b))
				arrived += len(b)
				if tc.complete && i == tc.frames-1 {
					// Connection-only mode answers the publish with 540.
					amqptest.RequireCode(t, err, amqp.NotImplemented, "%v", err)
					break
				}
				require.NoError(t, err)
				c := cap(ch.asm.body)
				require.LessOrEqual(t, c, 2*arrived, "after %d bytes", arrived)
				require.LessOrEqual(t, uint64(c), tc.announce)
				if c != lastCap {
					growths++
					lastCap = c
				}
				require.Equal(t, int64(len(props)+c), alarms.Buffered(), "a waiting content counts as buffered")
			}
			require.LessOrEqual(t, growths, 9, "the buffer doubles; it is not copied per frame")
			if !tc.complete {
				// What the connection's end does (a channel.close here
				// would be a 505: the body is not complete).
				c.releaseAll()
			}
			require.Zero(t, alarms.Buffered(), "completed or released: nothing buffered")
		})
	}
}

// TestAnnouncedBodySizeCostsNothing: over raw frames, a header announcing
// 128 MiB with no body, and one announcing 128 MiB that sent 64,000 bytes,
// grow the heap by about what arrived, not by what was announced; the
// partial body counts as buffered until the connection ends, and nothing
// is left after that.
func TestAnnouncedBodySizeCostsNothing(t *testing.T) {
	alarms := &Alarms{}
	cfg := testConfig()
	cfg.Alarms = alarms
	p := startPeer(t, cfg)
	p.Handshake()
	for ch := uint16(1); ch <= 3; ch++ {
		p.OpenChannel(ch)
	}
	// roundTrip returns once everything sent before it was handled.
	roundTrip := func() {
		p.SendMethod(3, &amqp.ChannelFlow{Active: true})
		_, ok := p.ExpectMethod(3).(*amqp.ChannelFlowOk)
		require.True(t, ok)
	}
	roundTrip()
	before := measure.LiveHeap()

	props := (&amqp.Properties{}).Append(nil)
	var out []byte
	for _, ch := range []uint16{1, 2} {
		out = amqp.AppendMethodFrame(out, ch, &amqp.BasicPublish{RoutingKey: "q"})
		out = amqp.AppendHeaderFrame(out, ch, amqp.ClassBasic, 128<<20, props)
	}
	body := make([]byte, 8000)
	for range 8 {
		out = amqp.AppendFrame(out, amqp.FrameBody, 2, body)
	}
	p.Send(out)
	roundTrip()
	grown := measure.LiveHeap() - before
	t.Logf("heap grew %d bytes for 2 headers announcing 128 MiB each and 64,000 body bytes", grown)
	require.Less(t, grown, int64(4<<20), "the heap grows by what arrived, not by what was announced")
	require.GreaterOrEqual(t, alarms.Buffered(), int64(64000))
	require.LessOrEqual(t, alarms.Buffered(), int64(2*64000+len(props)))

	p.Conn.Close()
	require.Error(t, p.serveResult())
	require.Zero(t, alarms.Buffered(), "the partial body is released with the connection")
	require.Less(t, measure.LiveHeap()-before, int64(4<<20), "nothing stays after the connection ends")
}

// TestTransactionBodiesCountAsBuffered: the publishes of an uncommitted
// transaction count as buffered until commit hands them to the queue, or
// rollback, the channel's close or the connection's end drop them.
func TestTransactionBodiesCountAsBuffered(t *testing.T) {
	alarms := &Alarms{}
	cfg := testConfig()
	cfg.Alarms = alarms
	vh := testVHost(t)
	cfg.VHost = func(name string) (*vhost.VHost, bool) { return vh, name == "/" }
	p := startPeer(t, cfg)
	p.Handshake()
	props := (&amqp.Properties{ContentType: "text/plain"}).Append(nil)
	body := make([]byte, 1000)
	publish := func(ch uint16, n int) {
		var out []byte
		for range n {
			out = amqp.AppendMethodFrame(out, ch, &amqp.BasicPublish{RoutingKey: "q"})
			out = amqp.AppendHeaderFrame(out, ch, amqp.ClassBasic, uint64(len(body)), props)
			out = amqp.AppendFrame(out, amqp.FrameBody, ch, body)
		}
		p.Send(out)
	}
	queued := func(ch uint16) uint32 {
		p.SendMethod(ch, &amqp.QueueDeclare{Queue: "q", Passive: true})
		ok, isOk := p.ExpectMethod(ch).(*amqp.QueueDeclareOk)
		require.True(t, isOk)
		return ok.MessageCount
	}
	txMethod := func(ch uint16, m, want amqp.Method) {
		p.SendMethod(ch, m)
		got := p.ExpectMethod(ch)
		require.IsType(t, want, got)
	}
	per := int64(len(props) + len(body))

	p.OpenChannel(1)
	p.SendMethod(1, &amqp.QueueDeclare{Queue: "q"})
	_, ok := p.ExpectMethod(1).(*amqp.QueueDeclareOk)
	require.True(t, ok)
	txMethod(1, &amqp.TxSelect{}, &amqp.TxSelectOk{})

	publish(1, 3)
	require.Zero(t, queued(1))
	require.Equal(t, 3*per, alarms.Buffered(), "uncommitted publishes count")
	txMethod(1, &amqp.TxRollback{}, &amqp.TxRollbackOk{})
	require.Zero(t, alarms.Buffered(), "rollback releases them")

	publish(1, 2)
	txMethod(1, &amqp.TxCommit{}, &amqp.TxCommitOk{})
	require.Zero(t, alarms.Buffered(), "commit hands them to the queue")
	require.Equal(t, uint32(2), queued(1))

	publish(1, 2)
	require.Equal(t, uint32(2), queued(1))
	require.Equal(t, 2*per, alarms.Buffered())
	p.SendMethod(1, &amqp.ChannelClose{ReplyCode: amqp.ReplySuccess})
	_, ok = p.ExpectMethod(1).(*amqp.ChannelCloseOk)
	require.True(t, ok)
	require.Zero(t, alarms.Buffered(), "the channel's close drops them")

	p.OpenChannel(2)
	txMethod(2, &amqp.TxSelect{}, &amqp.TxSelectOk{})
	publish(2, 2)
	require.Equal(t, uint32(2), queued(2))
	require.Equal(t, 2*per, alarms.Buffered())
	p.Conn.Close()
	require.Error(t, p.serveResult())
	require.Zero(t, alarms.Buffered(), "the connection's end drops them")
}

// BenchmarkContentAssembly measures the reader's cost of assembling one
// publish (method, header, body frames of a full 128 KiB frame-max) in
// connection-only mode: a body in one frame gets one exact allocation; a
// longer one grows with its frames (about twice its size allocated in all,
// the price of reserving nothing a header merely announces).
func BenchmarkContentAssembly(b *testing.B) {
	const framePayload = DefaultFrameMax - 8
	for _, bc := range []struct {
		name string
		size int
	}{{"1KiB", 1 << 10}, {"100KiB", 100 << 10}, {"1MiB", 1 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			c := NewConn(newDiscardRWC(), "bench#1", testConfig())
			c.state.Store(int32(stateOpen))
			c.channelMax = 16
			if err := c.handleFrame(methodFrame(1, &amqp.ChannelOpen{})); err != nil {
				b.Fatal(err)
			}
			ch := c.channels[1]
			pub := methodFrame(1, &amqp.BasicPublish{RoutingKey: "k"})
			hdr := headerFrame(1, amqp.ClassBasic, uint64(bc.size), (&amqp.Properties{ContentType: "x"}).Append(nil))
			chunk := make([]byte, framePayload)
			b.ReportAllocs()
			b.SetBytes(int64(bc.size))
			for b.Loop() {
				_ = ch.handleFrame(pub)
				_ = ch.handleFrame(hdr)
				for left := bc.size; left > 0; {
					n := min(left, len(chunk))
					// The last frame completes the publish, which
					// connection-only mode answers with 540.
					_ = ch.handleFrame(amqp.Frame{Type: amqp.FrameBody, Channel: 1, Payload: chunk[:n]})
					left -= n
				}
				c.out.Lock()
				c.out.buf = c.out.buf[:0]
				c.out.Unlock()
			}
		})
	}
}
