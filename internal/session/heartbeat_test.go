package session

import (
	"container/heap"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// scheduled reports whether c is in the heartbeat schedule.
func (s *heartbeatSchedule) scheduled(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := c.out.hb.index
	return i >= 0 && i < len(s.conns) && s.conns[i] == c
}

// openWithHeartbeat runs p's handshake accepting the server's heartbeat.
func openWithHeartbeat(t *testing.T, p *peer) {
	t.Helper()
	tune := p.StartToTune()
	require.NotZero(t, tune.Heartbeat)
	p.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: tune.Heartbeat})
	p.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	_, ok := p.ExpectMethod(0).(*amqp.ConnectionOpenOk)
	require.True(t, ok)
}

// TestHeartbeatScheduleSharedTimer: connections with heartbeats are entries
// of the one shared schedule, armed on one timer, not timers of their own,
// and leave it when they end.
func TestHeartbeatScheduleSharedTimer(t *testing.T) {
	cfg := testConfig()
	cfg.Heartbeat = time.Minute
	peers := make([]*peer, 20)
	for i := range peers {
		peers[i] = startPeer(t, cfg)
		openWithHeartbeat(t, peers[i])
	}
	for _, p := range peers {
		require.True(t, heartbeats.scheduled(p.conn))
		p.conn.out.Lock()
		require.Nil(t, p.conn.out.handshakeTimer, "an open connection keeps its handshake timer")
		p.conn.out.Unlock()
	}
	heartbeats.mu.Lock()
	require.NotNil(t, heartbeats.timer)
	require.False(t, heartbeats.armed.IsZero(), "the schedule's timer is armed")
	heartbeats.mu.Unlock()

	for _, p := range peers {
		p.SendMethod(0, &amqp.ConnectionClose{})
		_, ok := p.ExpectMethod(0).(*amqp.ConnectionCloseOk)
		require.True(t, ok)
		p.Conn.Close()
		require.NoError(t, p.serveResult())
		require.False(t, heartbeats.scheduled(p.conn), "a finished connection stays scheduled")
	}
}

// TestHeartbeatScheduleFiresDueEntries: fire ticks every entry due within
// the slack, once each, reschedules them half an interval on and leaves
// the others alone.
func TestHeartbeatScheduleFiresDueEntries(t *testing.T) {
	var s heartbeatSchedule
	mk := func(half time.Duration) *Conn {
		c := NewConn(newDiscardRWC(), "hb", testConfig())
		t.Cleanup(c.closeRWC)
		c.out.heartbeatHalf = half
		c.wrote.Store(true) // so the tick queues no heartbeat frame
		return c
	}
	due, later := mk(time.Hour), mk(time.Hour)
	s.add(due, time.Hour)
	s.add(later, time.Hour)
	defer s.remove(due)
	defer s.remove(later)

	s.mu.Lock()
	due.out.hb.at = time.Now().Add(heartbeatSlack / 2) // within the slack
	heap.Init(&s.conns)
	s.mu.Unlock()
	s.fire()

	require.False(t, due.wrote.Load(), "the due connection was not ticked")
	require.True(t, later.wrote.Load(), "a connection not due was ticked")
	require.Greater(t, time.Until(due.out.hb.at), 59*time.Minute, "not rescheduled half an interval on")
	require.Equal(t, 2, s.len())
}

// TestIdleTickReleasesWriterBuffers: a heartbeat tick of a connection
// that wrote nothing since the last one drops the writer's spare buffer,
// however large a burst made it, and queues the heartbeat in a small one,
// which the writer it starts writes.
func TestIdleTickReleasesWriterBuffers(t *testing.T) {
	rwc := &recordingRWC{t: t, closed: make(chan struct{})}
	c := NewConn(rwc, "hb#idle", testConfig())
	defer c.closeRWC()
	c.out.heartbeatHalf = time.Hour // ticks are called by hand, not scheduled
	c.out.spare = make([]byte, 0, maxSpareBuffer)
	c.out.buf = make([]byte, 0, 4096)
	c.heartbeatTick()
	c.out.Lock()
	c.waitFlushedLocked()
	defer c.out.Unlock()
	require.LessOrEqual(t, cap(c.out.spare), idleBufferCap)
	require.LessOrEqual(t, cap(c.out.buf), idleBufferCap)
	rwc.mu.Lock()
	defer rwc.mu.Unlock()
	require.Equal(t, amqp.AppendHeartbeatFrame(nil), rwc.got)
}

// TestIdleTickWritesHeartbeatInPlace: over TCP an idle connection's tick
// writes the heartbeat itself, so it is on the wire when the tick returns,
// with no writer goroutine started and the writer's turn given back.
func TestIdleTickWritesHeartbeatInPlace(t *testing.T) {
	p := startTCPPeer(t, testConfig())
	p.Handshake()
	c := p.conn
	require.NotNil(t, c.tryWrite, "a TCP stream writes without waiting")
	c.out.Lock()
	c.waitFlushedLocked() // open-ok is out
	c.out.heartbeatHalf = time.Hour
	c.out.Unlock()
	c.wrote.Store(false)
	sent := c.tr.Stats().Sent
	c.heartbeatTick()
	require.Equal(t, sent+heartbeatFrameSize, c.tr.Stats().Sent, "written by the tick itself")
	c.out.Lock()
	require.False(t, c.out.flushing)
	require.Empty(t, c.out.buf)
	c.out.Unlock()
	f, err := p.Frames.ReadFrame() // RawClient.ReadFrame skips heartbeats
	require.NoError(t, err)
	require.Equal(t, amqp.FrameHeartbeat, f.Type)
}

// TestHeartbeatInPlaceOnAFullSocket: when the socket has no room for the
// heartbeat (the client is not reading), the tick leaves the frame to a
// writer goroutine, which writes it, whole and after what was already on
// its way, once the client reads.
func TestHeartbeatInPlaceOnAFullSocket(t *testing.T) {
	p := startTCPPeer(t, testConfig())
	p.Handshake()
	c := p.conn
	c.out.Lock()
	c.waitFlushedLocked()
	c.out.flushing = true // the writer's turn, as heartbeatTick takes it
	c.out.Unlock()
	junk := make([]byte, 64<<10)
	total := 0
	for { // fill the socket: the client reads nothing yet
		n, err := c.tryWrite.TryWrite(junk)
		if err != nil || n == 0 {
			require.NoError(t, err)
			break
		}
		total += n
		if total > 64<<20 {
			c.tryHeartbeat() // give the turn back before failing
			t.Fatal("the socket never filled")
		}
	}
	c.tryHeartbeat()
	// Whether the writer has taken it yet or not, the frame is out of
	// the tick's hands: read it after the junk, whole.
	got := make([]byte, total+heartbeatFrameSize)
	_, err := io.ReadFull(p.Conn, got)
	require.NoError(t, err)
	require.Equal(t, heartbeatFrame, got[total:])
	c.out.Lock()
	c.waitFlushedLocked()
	require.Empty(t, c.out.buf)
	c.out.Unlock()
}
