package session

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/events"
)

// A connection reports ConnectionCreated once open and ConnectionClosed
// when it ended, with the first connection.close either side sent, or
// the error that ended the socket; one that never opened reports nothing.
func TestConnectionEvents(t *testing.T) {
	opened := events.Event{Kind: events.ConnectionCreated, VHost: "/", Connection: "test#1", User: "guest", Peer: "pipe"}
	closed := func(code uint16, reason string) events.Event {
		e := opened
		e.Kind, e.Code, e.Reason = events.ConnectionClosed, code, reason
		return e
	}
	tests := []struct {
		name string
		run  func(p *peer)
		want []events.Event // Reason "*": any non-empty text
	}{
		{"client closes", func(p *peer) {
			p.Handshake()
			p.SendMethod(0, &amqp.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
			_, ok := p.ExpectMethod(0).(*amqp.ConnectionCloseOk)
			require.True(p.TB, ok)
			p.Conn.Close()
		}, []events.Event{opened, closed(200, "bye")}},
		{"server closes", func(p *peer) {
			p.Handshake()
			p.conn.Shutdown(amqp.ConnectionForced, "stop")
			p.ExpectClose(amqp.ConnectionForced)
		}, []events.Event{opened, closed(320, "CONNECTION_FORCED - stop")}},
		{"the first close wins", func(p *peer) {
			p.Handshake()
			p.SendMethod(0, &amqp.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
			_, ok := p.ExpectMethod(0).(*amqp.ConnectionCloseOk)
			require.True(p.TB, ok)
			p.conn.Shutdown(amqp.ConnectionForced, "stop")
			p.Conn.Close()
		}, []events.Event{opened, closed(200, "bye")}},
		{"client misses heartbeats", func(p *peer) {
			p.StartToTune()
			p.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: 16, FrameMax: 8192, Heartbeat: 1})
			p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
			_, ok := p.ExpectMethod(0).(*amqp.ConnectionOpenOk)
			require.True(p.TB, ok)
			p.ExpectEOF() // silent for two intervals: dropped
		}, []events.Event{opened, closed(0, "missed heartbeats from client, timeout: 1s")}},
		{"client hangs up", func(p *peer) {
			p.Handshake()
			p.Conn.Close()
		}, []events.Event{opened, closed(0, "*")}},
		{"connection error", func(p *peer) {
			p.Handshake()
			p.SendFrame(amqp.FrameHeartbeat, 1, nil)
			p.ExpectClose(amqp.FrameError)
		}, []events.Event{opened, closed(501, "*")}},
		{"login refused: nothing", func(p *peer) {
			p.Send([]byte("AMQP\x00\x00\x09\x01"))
			p.ExpectMethod(0)
			p.SendMethod(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00wrong", Locale: "en_US"})
			p.ExpectClose(amqp.AccessRefused)
		}, nil},
		{"wrong protocol: nothing", func(p *peer) {
			p.Send([]byte("HTTP/1.1"))
			p.ExpectEOF()
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hub := events.NewHub(nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			evs := events.Subscribe(ctx, hub, 16, events.All, func(e events.Event, _ time.Time, _ uint64) events.Event { return e })
			cfg := testConfig()
			cfg.Heartbeat = time.Second // proposed; only one case accepts it
			cfg.Events = hub
			p := startPeer(t, cfg)
			tc.run(p)
			p.Conn.Close()
			_ = p.serveResult() // the events are out when Serve returns
			var got []events.Event
			for len(evs) > 0 {
				got = append(got, <-evs)
			}
			for i := range got {
				if i < len(tc.want) && tc.want[i].Reason == "*" {
					require.NotEmpty(t, got[i].Reason)
					got[i].Reason = "*"
				}
			}
			require.Equal(t, tc.want, got)
		})
	}
}
