package broker

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
)

// blockedConns counts the connections an alarm holds now.
func blockedConns(b *Broker) int {
	n := 0
	for _, c := range b.sortedConns() {
		if c.Blocked() {
			n++
		}
	}
	return n
}

// publishFrames is a basic.publish to queue q with its header announcing
// announce bytes and size bytes of body, in frames of at most frameMax.
func publishFrames(ch uint16, q string, announce uint64, size int, frameMax int) []byte {
	out := amqp.AppendMethodFrame(nil, ch, &amqp.BasicPublish{RoutingKey: q})
	out = amqp.AppendHeaderFrame(out, ch, amqp.ClassBasic, announce, (&amqp.Properties{}).Append(nil))
	chunk := make([]byte, frameMax-8)
	for size > 0 {
		n := min(size, len(chunk))
		out = amqp.AppendFrame(out, amqp.FrameBody, ch, chunk[:n])
		size -= n
	}
	return out
}

// TestMemoryAlarmCountsBufferedBodies: a body still arriving (a header
// announcing 64 MiB, the body streaming in) and the publishes of a
// transaction not committed count towards the memory watermark, so the
// alarm is raised and the publisher held before it sent everything; when
// the publisher hangs up the bytes are released and the alarm clears.
func TestMemoryAlarmCountsBufferedBodies(t *testing.T) {
	const watermark = 1 << 20
	for _, tc := range []struct {
		name string
		tx   bool
	}{
		{"partial body", false},
		{"uncommitted transaction", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, Options{MemoryHighWatermark: watermark, alarmPolling: fastAlarms})
			c := amqptest.DialRaw(t, b.Addr().String())
			c.Handshake()
			c.OpenChannel(1)
			c.SendMethod(1, &amqp.QueueDeclare{Queue: "q"})
			_, ok := c.ExpectMethod(1).(*amqp.QueueDeclareOk)
			require.True(t, ok)
			frameMax := DefaultFrameMax
			var out []byte
			if tc.tx {
				c.SendMethod(1, &amqp.TxSelect{})
				_, ok := c.ExpectMethod(1).(*amqp.TxSelectOk)
				require.True(t, ok)
				for range 64 {
					out = append(out, publishFrames(1, "q", 512<<10, 512<<10, frameMax)...)
				}
			} else {
				out = publishFrames(1, "q", 64<<20, 32<<20, frameMax)
			}
			// The write may stop once the reader is held and the socket
			// buffers are full: write from the side.
			wrote := make(chan error, 1)
			go func() {
				_, err := c.Conn.Write(out)
				wrote <- err
			}()
			require.Eventually(t, func() bool { return len(b.Alarms()) == 1 }, amqptest.Timeout, time.Millisecond,
				"buffered bodies raise the memory alarm")
			require.Equal(t, []Alarm{AlarmMemory}, b.Alarms())
			require.GreaterOrEqual(t, b.alarmStatus().MemUsed, int64(watermark))
			require.Eventually(t, func() bool { return blockedConns(b) == 1 }, amqptest.Timeout, time.Millisecond,
				"the publisher is held")

			// A reset: a FIN would wait behind the megabytes the held
			// reader leaves in the socket buffers, and stay unsent.
			c.Conn.(*net.TCPConn).SetLinger(0)
			c.Conn.Close()
			<-wrote
			require.Eventually(t, func() bool { return len(b.Connections()) == 0 }, amqptest.Timeout, time.Millisecond)
			require.Zero(t, b.alarm.Gate().Buffered(), "the hung-up publisher's bytes are released")
			require.Eventually(t, func() bool { return len(b.Alarms()) == 0 }, amqptest.Timeout, time.Millisecond,
				"and the alarm clears")
		})
	}
}

// TestBlockedPublisherHangupFreesConnection: publishers held by an alarm
// that hang up (FIN, half close, RST) have their connections freed while
// the alarm is still raised.
func TestBlockedPublisherHangupFreesConnection(t *testing.T) {
	b := startBroker(t, Options{})
	b.raiseAlarm(AlarmMemory)
	hangUps := []func(*net.TCPConn){
		func(c *net.TCPConn) { c.Close() },
		func(c *net.TCPConn) { c.CloseWrite() },
		func(c *net.TCPConn) {
			c.SetLinger(0)
			c.Close()
		},
	}
	const n = 30
	clients := make([]*amqptest.RawClient, n)
	for i := range clients {
		c := amqptest.DialRaw(t, b.Addr().String())
		c.Handshake()
		c.OpenChannel(1)
		c.Send(publishFrames(1, "q", 1, 1, 4096))
		clients[i] = c
	}
	require.Eventually(t, func() bool { return blockedConns(b) == n }, amqptest.Timeout, time.Millisecond)
	require.Len(t, b.Connections(), n)
	for i, c := range clients {
		if i%2 == 0 {
			// More frames behind the held one, unread when it hangs up.
			c.Send(publishFrames(1, "q", 100, 100, 4096))
		}
		hangUps[i%len(hangUps)](c.Conn.(*net.TCPConn))
	}
	require.Eventually(t, func() bool { return len(b.Connections()) == 0 }, amqptest.Timeout, time.Millisecond,
		"hung-up publishers are freed while the alarm lasts")
	require.Equal(t, []Alarm{AlarmMemory}, b.Alarms())
}
