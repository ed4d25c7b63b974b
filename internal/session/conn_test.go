package session

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

func TestHandshakeAndClientClose(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Send([]byte("AMQP\x00\x00\x09\x01"))

	start, ok := p.ExpectMethod(0).(*amqp.ConnectionStart)
	require.True(t, ok)
	require.Equal(t, uint8(0), start.VersionMajor)
	require.Equal(t, uint8(9), start.VersionMinor)
	require.Equal(t, "PLAIN AMQPLAIN", start.Mechanisms)
	require.Equal(t, "en_US", start.Locales)
	require.Equal(t, "Warren", start.ServerProperties["product"])
	require.Equal(t, "Go", start.ServerProperties["platform"])
	caps, ok := start.ServerProperties["capabilities"].(amqp.Table)
	require.True(t, ok, "capabilities is a table")
	require.Equal(t, amqp.Table{
		"authentication_failure_close": true,
		"basic.nack":                   true,
		"connection.blocked":           true,
		"consumer_cancel_notify":       true,
		"consumer_priorities":          true,
		"direct_reply_to":              true,
		"exchange_exchange_bindings":   true,
		"per_consumer_qos":             true,
		"publisher_confirms":           true,
	}, caps)

	p.SendMethod(0, &amqp.ConnectionStartOk{Mechanism: "AMQPLAIN", Response: amqplain(t, "guest", "guest"), Locale: "en_US"})
	tune, ok := p.ExpectMethod(0).(*amqp.ConnectionTune)
	require.True(t, ok)
	require.Equal(t, &amqp.ConnectionTune{ChannelMax: 16, FrameMax: 8192, Heartbeat: 0}, tune)
	p.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: 16, FrameMax: 8192})
	p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	_, ok = p.ExpectMethod(0).(*amqp.ConnectionOpenOk)
	require.True(t, ok)

	p.SendMethod(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess, ReplyText: "bye"})
	_, ok = p.ExpectMethod(0).(*amqp.ConnectionCloseOk)
	require.True(t, ok)
	p.ExpectEOF()
	require.NoError(t, p.serveResult())
}

// TestStartFrameFollowsSettings: connection.start is encoded once per
// product, version and mechanisms, and each connection gets the one that
// matches its own.
func TestStartFrameFollowsSettings(t *testing.T) {
	for _, tc := range []struct{ product, version, mechanisms string }{
		{"Warren", "1.0", "PLAIN AMQPLAIN"},
		{"Warren", "1.0", "EXTERNAL PLAIN AMQPLAIN"},
		{"RabbitMQ", "1.0", "PLAIN AMQPLAIN"},
		{"RabbitMQ", "3.13.7", "PLAIN AMQPLAIN"},
	} {
		t.Run(tc.product+"/"+tc.version+"/"+tc.mechanisms, func(t *testing.T) {
			s := &settings{product: tc.product, version: tc.version}
			frame := startFrame(s, tc.mechanisms)
			f, err := amqp.NewFrameReader(bytes.NewReader(frame)).ReadFrame()
			require.NoError(t, err)
			require.Equal(t, uint16(0), f.Channel)
			m, err := amqp.DecodeMethod(f.Payload)
			require.NoError(t, err)
			start, ok := m.(*amqp.ConnectionStart)
			require.True(t, ok)
			require.Equal(t, tc.mechanisms, start.Mechanisms)
			require.Equal(t, tc.product, start.ServerProperties["product"])
			require.Equal(t, tc.version, start.ServerProperties["version"])
			require.Zero(t, testing.AllocsPerRun(10, func() { startFrame(s, tc.mechanisms) }), "encoded once")
		})
	}
}

func TestServerDefaults(t *testing.T) {
	cfg := &Config{Authenticate: func(string, string) bool { return true }}
	p := startPeer(t, cfg)
	p.Send([]byte("AMQP\x00\x00\x09\x01"))
	p.ExpectMethod(0)
	p.SendMethod(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00u\x00p"})
	tune, ok := p.ExpectMethod(0).(*amqp.ConnectionTune)
	require.True(t, ok)
	// RabbitMQ's defaults.
	require.Equal(t, &amqp.ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60}, tune)
}

func TestWrongProtocolHeader(t *testing.T) {
	for _, header := range []string{"GARBAGE!", "AMQP\x01\x01\x00\x09", "AMQP\x00\x00\x09\x02", "GET / HT"} {
		t.Run(header, func(t *testing.T) {
			p := startPeer(t, testConfig())
			p.Send([]byte(header))
			got := make([]byte, 8)
			_, err := io.ReadFull(p.Conn, got)
			require.NoError(t, err)
			require.Equal(t, "AMQP\x00\x00\x09\x01", string(got))
			p.ExpectEOF()
			require.Error(t, p.serveResult())
		})
	}
}

func TestPeerHangsUpDuringHeader(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Send([]byte("AMQ"))
	p.Conn.Close()
	require.ErrorIs(t, p.serveResult(), io.ErrUnexpectedEOF)
}

// TestHandshakeErrors covers every way start-ok, tune-ok and open can fail;
// each ends with connection.close and the given code.
func TestHandshakeErrors(t *testing.T) {
	plain := func(user, pass string) *amqp.ConnectionStartOk {
		return &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00" + user + "\x00" + pass}
	}
	goodTune := &amqp.ConnectionTuneOk{ChannelMax: 16, FrameMax: 8192}
	cases := []struct {
		name     string
		startOk  *amqp.ConnectionStartOk
		tuneOk   *amqp.ConnectionTuneOk // nil: stop after start-ok
		vhost    *string                // nil: stop after tune-ok
		wantCode uint16
	}{
		{name: "wrong password", startOk: plain("guest", "nope"), wantCode: amqp.AccessRefused},
		{name: "unknown user", startOk: plain("mallory", "guest"), wantCode: amqp.AccessRefused},
		{name: "AMQPLAIN wrong password", startOk: &amqp.ConnectionStartOk{Mechanism: "AMQPLAIN", Response: amqplain(t, "guest", "x")}, wantCode: amqp.AccessRefused},
		{name: "malformed PLAIN", startOk: &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "guest"}, wantCode: amqp.SyntaxError},
		{name: "malformed AMQPLAIN", startOk: &amqp.ConnectionStartOk{Mechanism: "AMQPLAIN", Response: "\x05LOGIN"}, wantCode: amqp.SyntaxError},
		{name: "unknown mechanism", startOk: &amqp.ConnectionStartOk{Mechanism: "EXTERNAL"}, wantCode: amqp.CommandInvalid},
		{name: "frame_max zero", startOk: plain("guest", "guest"), tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 16}, wantCode: amqp.NotAllowed},
		{name: "frame_max above server", startOk: plain("guest", "guest"), tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 16, FrameMax: 8193}, wantCode: amqp.NotAllowed},
		{name: "frame_max below minimum", startOk: plain("guest", "guest"), tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 16, FrameMax: 4095}, wantCode: amqp.NotAllowed},
		{name: "channel_max zero", startOk: plain("guest", "guest"), tuneOk: &amqp.ConnectionTuneOk{FrameMax: 8192}, wantCode: amqp.NotAllowed},
		{name: "channel_max above server", startOk: plain("guest", "guest"), tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 17, FrameMax: 8192}, wantCode: amqp.NotAllowed},
		{name: "unknown vhost", startOk: plain("guest", "guest"), tuneOk: goodTune, vhost: ptr("nope"), wantCode: amqp.NotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startPeer(t, testConfig())
			p.Send([]byte("AMQP\x00\x00\x09\x01"))
			p.ExpectMethod(0)
			p.SendMethod(0, tc.startOk)
			if tc.tuneOk != nil {
				_, ok := p.ExpectMethod(0).(*amqp.ConnectionTune)
				require.True(t, ok)
				p.SendMethod(0, tc.tuneOk)
			}
			if tc.vhost != nil {
				p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: *tc.vhost})
			}
			cl := p.ExpectClose(tc.wantCode)
			require.Equal(t, amqp.ClassConnection, cl.ClassId)
			require.NoError(t, p.serveResult())
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestHandshakeOutOfOrder(t *testing.T) {
	cases := []struct {
		name string
		send func(p *peer)
		code uint16
	}{
		{"open before start-ok", func(p *peer) { p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"}) }, amqp.CommandInvalid},
		{"tune-ok before start-ok", func(p *peer) { p.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: 1, FrameMax: 8192}) }, amqp.CommandInvalid},
		{"secure-ok never asked for", func(p *peer) { p.SendMethod(0, &amqp.ConnectionSecureOk{}) }, amqp.CommandInvalid},
		{"channel frame before open", func(p *peer) { p.SendMethod(1, &amqp.ChannelOpen{}) }, amqp.UnexpectedFrame},
		{"channel.open on channel 0", func(p *peer) { p.SendMethod(0, &amqp.ChannelOpen{}) }, amqp.ChannelError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startPeer(t, testConfig())
			p.Send([]byte("AMQP\x00\x00\x09\x01"))
			p.ExpectMethod(0)
			tc.send(p)
			p.ExpectClose(tc.code)
		})
	}
}

func TestClientClosesDuringHandshake(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Send([]byte("AMQP\x00\x00\x09\x01"))
	p.ExpectMethod(0)
	p.SendMethod(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess})
	_, ok := p.ExpectMethod(0).(*amqp.ConnectionCloseOk)
	require.True(t, ok)
	p.ExpectEOF()
	require.NoError(t, p.serveResult())
}

func TestHandshakeTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.HandshakeTimeout = 20 * time.Millisecond
	p := startPeer(t, cfg)
	p.Send([]byte("AMQP\x00\x00\x09\x01"))
	p.ExpectMethod(0)
	// The client never answers connection.start: the server hangs up.
	p.ExpectEOF()
	require.Error(t, p.serveResult())
}

// frame returns the raw bytes of one frame, for corrupting.
func frame(typ uint8, ch uint16, payload []byte) []byte {
	return amqp.AppendFrame(nil, typ, ch, payload)
}

func methodPayload(m amqp.Method) []byte { return amqp.AppendMethod(nil, m) }

// TestProtocolErrors drives an open connection into each error the spec
// assigns a code to and checks the code (all of these are hard errors, so
// the connection closes).
func TestProtocolErrors(t *testing.T) {
	basicPublish := methodPayload(&amqp.BasicPublish{RoutingKey: "k"})
	cases := []struct {
		name string
		send func(p *peer)
		code uint16
	}{
		{"bad frame end octet", func(p *peer) {
			b := frame(amqp.FrameMethod, 1, methodPayload(&amqp.ChannelOpen{}))
			b[len(b)-1] = 0x00
			p.Send(b)
		}, amqp.FrameError},
		{"frame larger than frame-max", func(p *peer) {
			// Only the header: the size alone must be refused.
			h := []byte{amqp.FrameBody, 0, 1, 0, 0, 0, 0}
			binary.BigEndian.PutUint32(h[3:], 8192)
			p.Send(h)
		}, amqp.FrameError},
		{"unknown frame type", func(p *peer) { p.SendFrame(7, 1, nil) }, amqp.FrameError},
		{"heartbeat on channel 1", func(p *peer) { p.SendFrame(amqp.FrameHeartbeat, 1, nil) }, amqp.FrameError},
		{"method on unopened channel", func(p *peer) { p.SendMethod(3, &amqp.BasicQos{}) }, amqp.ChannelError},
		{"body on unopened channel", func(p *peer) { p.SendFrame(amqp.FrameBody, 3, []byte("x")) }, amqp.ChannelError},
		{"second channel.open", func(p *peer) { p.OpenChannel(1); p.SendMethod(1, &amqp.ChannelOpen{}) }, amqp.ChannelError},
		{"channel above channel-max", func(p *peer) { p.SendMethod(17, &amqp.ChannelOpen{}) }, amqp.NotAllowed},
		{"body without header", func(p *peer) { p.OpenChannel(1); p.SendFrame(amqp.FrameBody, 1, []byte("x")) }, amqp.UnexpectedFrame},
		{"header without content method", func(p *peer) { p.OpenChannel(1); p.SendHeader(1, amqp.ClassBasic, 1) }, amqp.UnexpectedFrame},
		{"method while header expected", func(p *peer) {
			p.OpenChannel(1)
			p.SendFrame(amqp.FrameMethod, 1, basicPublish)
			p.SendMethod(1, &amqp.ChannelFlow{Active: true})
		}, amqp.UnexpectedFrame},
		{"method while body expected", func(p *peer) {
			p.OpenChannel(1)
			p.SendFrame(amqp.FrameMethod, 1, basicPublish)
			p.SendHeader(1, amqp.ClassBasic, 10)
			p.SendFrame(amqp.FrameBody, 1, []byte("12345"))
			p.SendMethod(1, &amqp.ChannelFlow{Active: true})
		}, amqp.UnexpectedFrame},
		{"header for another class", func(p *peer) {
			p.OpenChannel(1)
			p.SendFrame(amqp.FrameMethod, 1, basicPublish)
			p.SendHeader(1, amqp.ClassQueue, 1)
		}, amqp.UnexpectedFrame},
		{"body larger than declared", func(p *peer) {
			p.OpenChannel(1)
			p.SendFrame(amqp.FrameMethod, 1, basicPublish)
			p.SendHeader(1, amqp.ClassBasic, 3)
			p.SendFrame(amqp.FrameBody, 1, []byte("1234"))
		}, amqp.FrameError},
		{"body-size above the sanity limit", func(p *peer) {
			p.OpenChannel(1)
			p.SendFrame(amqp.FrameMethod, 1, basicPublish)
			p.SendHeader(1, amqp.ClassBasic, maxBodySize+1)
		}, amqp.FrameError},
		{"malformed content header", func(p *peer) {
			p.OpenChannel(1)
			p.SendFrame(amqp.FrameMethod, 1, basicPublish)
			p.SendFrame(amqp.FrameHeader, 1, []byte{0, 60, 0})
		}, amqp.SyntaxError},
		{"content header on channel 0", func(p *peer) { p.SendHeader(0, amqp.ClassBasic, 0) }, amqp.UnexpectedFrame},
		{"unknown method ids", func(p *peer) { p.OpenChannel(1); p.SendFrame(amqp.FrameMethod, 1, []byte{0, 99, 0, 1}) }, amqp.CommandInvalid},
		{"truncated arguments", func(p *peer) {
			p.OpenChannel(1)
			p.SendFrame(amqp.FrameMethod, 1, []byte{0, byte(amqp.ClassChannel), 0, byte(amqp.MethodChannelFlowOk)})
		}, amqp.SyntaxError},
		{"connection method on a channel", func(p *peer) { p.OpenChannel(1); p.SendMethod(1, &amqp.ConnectionBlocked{}) }, amqp.CommandInvalid},
		{"server-only connection method", func(p *peer) { p.SendMethod(0, &amqp.ConnectionUnblocked{}) }, amqp.CommandInvalid},
		{"second connection.open", func(p *peer) { p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"}) }, amqp.CommandInvalid},
		{"stray channel.close-ok", func(p *peer) { p.OpenChannel(1); p.SendMethod(1, &amqp.ChannelCloseOk{}) }, amqp.CommandInvalid},
		{"server-only channel method", func(p *peer) { p.OpenChannel(1); p.SendMethod(1, &amqp.ChannelOpenOk{}) }, amqp.CommandInvalid},
		{"queue.declare not implemented", func(p *peer) { p.OpenChannel(1); p.SendMethod(1, &amqp.QueueDeclare{Queue: "q"}) }, amqp.NotImplemented},
		{"basic.publish not implemented", func(p *peer) {
			p.OpenChannel(1)
			p.SendFrame(amqp.FrameMethod, 1, basicPublish)
			p.SendHeader(1, amqp.ClassBasic, 6)
			p.SendFrame(amqp.FrameBody, 1, []byte("hel"))
			p.SendFrame(amqp.FrameBody, 1, []byte("lo!"))
		}, amqp.NotImplemented},
		{"server-only content method", func(p *peer) {
			p.OpenChannel(1)
			p.SendFrame(amqp.FrameMethod, 1, methodPayload(&amqp.BasicDeliver{ConsumerTag: "c"}))
			p.SendHeader(1, amqp.ClassBasic, 0)
		}, amqp.CommandInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startPeer(t, testConfig())
			p.Handshake()
			tc.send(p)
			p.ExpectClose(tc.code)
		})
	}
}

// TestClosingIgnoresOtherFrames: after connection.close the server ignores
// everything but close and close-ok.
func TestClosingIgnoresOtherFrames(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Handshake()
	p.SendMethod(5, &amqp.BasicQos{}) // 504: channel 5 not open
	m := p.ExpectMethod(0)
	cl, ok := m.(*amqp.ConnectionClose)
	require.True(t, ok)
	require.Equal(t, amqp.ChannelError, cl.ReplyCode)
	require.Equal(t, amqp.ClassBasic, cl.ClassId)
	require.Equal(t, amqp.MethodBasicQos, cl.MethodId)

	// None of these get an answer.
	p.SendMethod(1, &amqp.ChannelOpen{})
	p.SendFrame(amqp.FrameBody, 1, []byte("ignored"))
	p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	p.Send(amqp.AppendHeartbeatFrame(nil))
	// A crossing connection.close is answered and ends the connection.
	p.SendMethod(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess})
	_, ok = p.ExpectMethod(0).(*amqp.ConnectionCloseOk)
	require.True(t, ok)
	p.ExpectEOF()
	require.NoError(t, p.serveResult())
}

func TestCloseTimeoutWithoutCloseOk(t *testing.T) {
	cfg := testConfig()
	cfg.CloseTimeout = 250 * time.Millisecond // long enough for a loaded writer to send the close first
	p := startPeer(t, cfg)
	p.Handshake()
	p.SendMethod(2, &amqp.BasicQos{})
	_, ok := p.ExpectMethod(0).(*amqp.ConnectionClose)
	require.True(t, ok)
	// No close-ok: the server drops the connection after CloseTimeout.
	p.ExpectEOF()
	require.NoError(t, p.serveResult())
}

func TestShutdown(t *testing.T) {
	t.Run("open connection gets 320", func(t *testing.T) {
		p := startPeer(t, testConfig())
		p.Handshake()
		p.conn.Shutdown(amqp.ConnectionForced, "broker shutdown")
		p.conn.Shutdown(amqp.ConnectionForced, "again") // no second close
		cl := p.ExpectClose(amqp.ConnectionForced)
		require.Equal(t, "CONNECTION_FORCED - broker shutdown", cl.ReplyText)
		require.NoError(t, p.serveResult())
	})
	t.Run("before the protocol header the stream just closes", func(t *testing.T) {
		p := startPeer(t, testConfig())
		p.conn.Shutdown(amqp.ConnectionForced, "broker shutdown")
		p.ExpectEOF()
		require.Error(t, p.serveResult())
	})
}

func TestChannelLifecycle(t *testing.T) {
	p := startPeer(t, testConfig())
	p.Handshake()
	for ch := uint16(1); ch <= 16; ch++ {
		p.OpenChannel(ch)
	}
	p.SendMethod(3, &amqp.ChannelFlow{Active: false})
	flowOk, ok := p.ExpectMethod(3).(*amqp.ChannelFlowOk)
	require.True(t, ok)
	require.False(t, flowOk.Active)
	p.SendMethod(3, &amqp.ChannelFlow{Active: true})
	flowOk, ok = p.ExpectMethod(3).(*amqp.ChannelFlowOk)
	require.True(t, ok)
	require.True(t, flowOk.Active)

	for ch := uint16(1); ch <= 16; ch++ {
		p.SendMethod(ch, &amqp.ChannelClose{ReplyCode: amqp.ReplySuccess})
		_, ok := p.ExpectMethod(ch).(*amqp.ChannelCloseOk)
		require.True(t, ok)
	}
	// Numbers are free again.
	p.OpenChannel(16)
	p.SendMethod(0, &amqp.ConnectionClose{})
	_, ok = p.ExpectMethod(0).(*amqp.ConnectionCloseOk)
	require.True(t, ok)
	p.ExpectEOF()
}

func TestHeartbeats(t *testing.T) {
	cfg := testConfig()
	cfg.Heartbeat = time.Second
	p := startPeer(t, cfg)
	tune := p.StartToTune()
	require.Equal(t, uint16(1), tune.Heartbeat)
	p.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: 16, FrameMax: 8192, Heartbeat: 1})
	p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	_, ok := p.ExpectMethod(0).(*amqp.ConnectionOpenOk)
	require.True(t, ok)

	// Idle: the server sends heartbeats. We stay silent, so after two
	// intervals it drops us.
	heartbeats := 0
	for {
		f, err := p.Frames.ReadFrame()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		require.Equal(t, amqp.FrameHeartbeat, f.Type)
		heartbeats++
	}
	require.GreaterOrEqual(t, heartbeats, 1)
	require.Error(t, p.serveResult())
}

// TestUpdateSecret checks connection.update-secret on an open connection:
// update-secret-ok for PLAIN and AMQPLAIN logins whatever the new secret
// (RabbitMQ's internal user database re-checks nothing), after which the
// connection carries on; before connection.open-ok it is out of sequence.
func TestUpdateSecret(t *testing.T) {
	tests := []struct {
		name      string
		mechanism string
		response  func(t *testing.T) string
	}{
		{"PLAIN", "PLAIN", func(*testing.T) string { return "\x00guest\x00guest" }},
		{"AMQPLAIN", "AMQPLAIN", func(t *testing.T) string { return amqplain(t, "guest", "guest") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startPeer(t, testConfig())
			p.Send([]byte("AMQP\x00\x00\x09\x01"))
			_, ok := p.ExpectMethod(0).(*amqp.ConnectionStart)
			require.True(t, ok)
			p.SendMethod(0, &amqp.ConnectionStartOk{Mechanism: tt.mechanism, Response: tt.response(t), Locale: "en_US"})
			tune, ok := p.ExpectMethod(0).(*amqp.ConnectionTune)
			require.True(t, ok)
			p.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
			p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
			_, ok = p.ExpectMethod(0).(*amqp.ConnectionOpenOk)
			require.True(t, ok)
			for _, secret := range []string{"guest", "not-the-password", ""} {
				p.SendMethod(0, &amqp.ConnectionUpdateSecret{NewSecret: secret, Reason: "token refresh"})
				m := p.ExpectMethod(0)
				_, ok = m.(*amqp.ConnectionUpdateSecretOk)
				require.True(t, ok, "got %s", m.Name())
			}
			p.OpenChannel(1) // the connection carries on
		})
	}
	t.Run("before open-ok", func(t *testing.T) {
		p := startPeer(t, testConfig())
		p.StartToTune()
		p.SendMethod(0, &amqp.ConnectionUpdateSecret{NewSecret: "s"})
		p.ExpectClose(amqp.CommandInvalid)
	})
}

// TestConnSize keeps a Conn within the 1 KiB allocation size class: every
// connection, idle or not, holds one (the root package's
// TestIdleConnectionMemory guards the whole idle cost). State only some
// connections use, as the Authorizer's permission cache, goes behind a
// pointer made when first needed.
func TestConnSize(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(Conn{}), uintptr(1024), "bytes in a Conn")
}
