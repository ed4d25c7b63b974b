package session

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// loopRWC is a connection whose client sends the same frames forever and
// reads nothing: Read cycles over data (a whole number of frames), Write
// discards.
type loopRWC struct {
	data []byte
	off  int
}

func (l *loopRWC) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}
func (l *loopRWC) Write(p []byte) (int, error) { return len(p), nil }
func (l *loopRWC) Close() error                { return nil }

// BenchmarkServeFrame measures the reader's cost per frame, from the read
// to the handler's return: a method frame (channel.flow, answered with
// flow-ok) and a heartbeat. It is the number the alarm gate must not move
// while no alarm is raised.
func BenchmarkServeFrame(b *testing.B) {
	for _, bc := range []struct {
		name  string
		frame []byte
	}{
		{"method", amqp.AppendMethodFrame(nil, 1, &amqp.ChannelFlow{Active: true})},
		{"heartbeat", amqp.AppendHeartbeatFrame(nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var data []byte
			for range 64 {
				data = append(data, bc.frame...)
			}
			c := NewConn(&loopRWC{data: data}, "bench#1", testConfig())
			c.state.Store(int32(stateOpen))
			c.channelMax = 16
			defer c.stopWriter()
			if err := c.handleFrame(methodFrame(1, &amqp.ChannelOpen{})); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if done, err := c.serveFrame(); done {
					b.Fatal(err)
				}
			}
		})
	}
}

// alarmPeer is startPeer with Alarms set; caps are the capabilities the
// client announces.
func alarmPeer(t *testing.T, caps amqp.Table) (*peer, *Alarms) {
	t.Helper()
	alarms := &Alarms{}
	cfg := testConfig()
	cfg.Alarms = alarms
	p := startPeer(t, cfg)
	p.Send([]byte("AMQP\x00\x00\x09\x01"))
	start, ok := p.ExpectMethod(0).(*amqp.ConnectionStart)
	require.True(t, ok)
	require.Equal(t, true, start.ServerProperties["capabilities"].(amqp.Table)["connection.blocked"], "the server announces connection.blocked")
	p.SendMethod(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US",
		ClientProperties: amqp.Table{"capabilities": caps}})
	tune, ok := p.ExpectMethod(0).(*amqp.ConnectionTune)
	require.True(t, ok)
	p.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	_, ok = p.ExpectMethod(0).(*amqp.ConnectionOpenOk)
	require.True(t, ok)
	return p, alarms
}

func TestBlockedReason(t *testing.T) {
	for active, want := range map[uint32]string{
		AlarmMemory:             "low on memory",
		AlarmDisk:               "low on disk",
		AlarmMemory | AlarmDisk: "low on memory & disk",
	} {
		require.Equal(t, want, BlockedReason(active))
	}
}

// TestAlarmHoldsPublisher: with an alarm raised, other methods go through,
// but a basic.publish stops the reader (after connection.blocked when the
// client asked for it) until the alarm clears; then connection.unblocked
// comes and the held publish is handled (in connection-only mode the basic
// class is answered with 540, which shows it was handled after the
// unblock).
func TestAlarmHoldsPublisher(t *testing.T) {
	for _, tc := range []struct {
		name   string
		caps   amqp.Table
		notify bool
		raise  []uint32 // alarm sets in turn, the last one non-zero
	}{
		{"memory, notified", amqp.Table{"connection.blocked": true}, true, []uint32{AlarmMemory}},
		{"disk then both, notified once", amqp.Table{"connection.blocked": true}, true, []uint32{AlarmDisk, AlarmDisk | AlarmMemory}},
		{"not announced", amqp.Table{}, false, []uint32{AlarmMemory}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, alarms := alarmPeer(t, tc.caps)
			p.OpenChannel(1)
			alarms.Set(tc.raise[0])
			p.OpenChannel(2) // not a publish: never held
			// Method and empty content in one write: the reader has both
			// buffered when it holds the method.
			props := (&amqp.Properties{}).Append(nil)
			p.Send(amqp.AppendHeaderFrame(amqp.AppendMethodFrame(nil, 1, &amqp.BasicPublish{RoutingKey: "q"}), 1, amqp.ClassBasic, 0, props))
			if tc.notify {
				b, ok := p.ExpectMethod(0).(*amqp.ConnectionBlocked)
				require.True(t, ok)
				require.Equal(t, BlockedReason(tc.raise[0]), b.Reason)
			}
			require.Eventually(t, p.conn.Blocked, 5*time.Second, time.Millisecond)
			for _, a := range tc.raise[1:] {
				alarms.Set(a)
			}
			alarms.Set(0)
			if tc.notify {
				_, ok := p.ExpectMethod(0).(*amqp.ConnectionUnblocked)
				require.True(t, ok)
			}
			p.ExpectClose(amqp.NotImplemented)
			require.False(t, p.conn.Blocked())
		})
	}
}

// TestAlarmShutdownWhileBlocked: Shutdown reaches a connection whose reader
// is held: connection.close goes out, the close-ok is read, Serve returns.
func TestAlarmShutdownWhileBlocked(t *testing.T) {
	p, alarms := alarmPeer(t, amqp.Table{"connection.blocked": true})
	p.OpenChannel(1)
	alarms.Set(AlarmDisk)
	p.SendMethod(1, &amqp.BasicPublish{RoutingKey: "q"})
	_, ok := p.ExpectMethod(0).(*amqp.ConnectionBlocked)
	require.True(t, ok)
	p.conn.Shutdown(amqp.ConnectionForced, "broker shutdown")
	p.ExpectClose(amqp.ConnectionForced)
	require.NoError(t, p.serveResult())
	require.Equal(t, AlarmDisk, alarms.Active(), "the alarm is still raised")
}

// TestAlarmPausesHeartbeatMonitor: while held, missed heartbeat ticks never
// drop the connection (the client's heartbeats are not read); once resumed
// the count starts over.
func TestAlarmPausesHeartbeatMonitor(t *testing.T) {
	c := NewConn(newDiscardRWC(), "hb#1", testConfig())
	defer c.closeRWC()
	c.out.heartbeatHalf = time.Hour // ticks are called by hand, not scheduled
	c.framesIn.Add(3)               // the publish that got the reader held, and before
	c.pauseHeartbeatMonitor()
	for range 10 * missedTicksLimit {
		c.heartbeatTick()
	}
	require.False(t, stopped(c), "a paused monitor dropped the connection")
	c.resumeHeartbeatMonitor()
	for range missedTicksLimit - 1 {
		c.heartbeatTick()
	}
	require.False(t, stopped(c))
	c.heartbeatTick()
	require.True(t, stopped(c), "the resumed monitor drops a silent client")
}

func stopped(c *Conn) bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// TestAlarmDirectPublishWaits: a direct publish waits while an alarm is
// raised; its context ends the wait without publishing, a clear lets it
// through, and a close of the connection ends it with ErrClosed.
func TestAlarmDirectPublishWaits(t *testing.T) {
	alarms := &Alarms{}
	cfg := testConfig()
	cfg.Alarms = alarms
	sink := &recordingSink{}
	c := NewDirect(cfg, "direct#1", testVHost(t), "guest", sink)
	t.Cleanup(func() { c.Shutdown(amqp.ConnectionForced, "test over") })
	require.NoError(t, c.Handle(1, &amqp.ChannelOpen{}, nil, nil))
	require.NoError(t, c.Handle(1, &amqp.QueueDeclare{Queue: "q"}, nil, nil))
	sink.take()
	props := (&amqp.Properties{}).Append(nil)
	publish := func(ctx context.Context) error {
		return c.HandleContext(ctx, 1, &amqp.BasicPublish{RoutingKey: "q"}, props, []byte("x"))
	}
	count := func() uint32 {
		require.NoError(t, c.Handle(1, &amqp.QueueDeclare{Queue: "q", Passive: true}, nil, nil))
		got := sink.take()
		require.Len(t, got, 1)
		return got[0].method.(*amqp.QueueDeclareOk).MessageCount
	}

	alarms.Set(AlarmMemory)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- publish(ctx) }()
	require.Eventually(t, c.Blocked, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Handle(1, &amqp.QueueDeclare{Queue: "q", Passive: true}, nil, nil), "other methods are not held")
	sink.take()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Zero(t, count(), "a cancelled publish publishes nothing")

	go func() { done <- publish(context.Background()) }()
	require.Eventually(t, c.Blocked, 5*time.Second, time.Millisecond)
	alarms.Set(0)
	require.NoError(t, <-done)
	require.Equal(t, uint32(1), count())

	alarms.Set(AlarmDisk)
	go func() { done <- publish(context.Background()) }()
	require.Eventually(t, c.Blocked, 5*time.Second, time.Millisecond)
	c.Shutdown(amqp.ConnectionForced, "broker shutdown")
	require.ErrorIs(t, <-done, ErrClosed)
}
