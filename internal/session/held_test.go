package session

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// appendPublish appends one publish of body to queue q on channel 1.
func appendPublish(b []byte, q, body string) []byte {
	b = amqp.AppendMethodFrame(b, 1, &amqp.BasicPublish{RoutingKey: q})
	b = amqp.AppendHeaderFrame(b, 1, amqp.ClassBasic, uint64(len(body)), (&amqp.Properties{}).Append(nil))
	return amqp.AppendFrame(b, amqp.FrameBody, 1, []byte(body))
}

// The reader holds the publishes of one read and hands them to their
// queues together: whatever method follows them in the same read sees
// every one of them in its queue, in publish order, and a queue's share
// arrives whole (the bodies carved out of one arena stay each its own).
func TestHeldPublishesReachTheirQueuesFirst(t *testing.T) {
	const n = 40 // a: even bodies, b: odd ones, interleaved in one write
	publishes := func() []byte {
		var b []byte
		for i := range n {
			q := "a"
			if i%2 == 1 {
				q = "b"
			}
			b = appendPublish(b, q, fmt.Sprintf("m%03d", i))
		}
		return b
	}
	tests := []struct {
		name  string
		then  amqp.Method
		check func(t *testing.T, p *peer)
	}{
		{"a passive declare counts them", &amqp.QueueDeclare{Queue: "a", Passive: true}, func(t *testing.T, p *peer) {
			ok, isOk := p.ExpectMethod(1).(*amqp.QueueDeclareOk)
			require.True(t, isOk)
			require.Equal(t, uint32(n/2), ok.MessageCount)
		}},
		{"a purge removes them", &amqp.QueuePurge{Queue: "b"}, func(t *testing.T, p *peer) {
			ok, isOk := p.ExpectMethod(1).(*amqp.QueuePurgeOk)
			require.True(t, isOk)
			require.Equal(t, uint32(n/2), ok.MessageCount)
		}},
		{"a delete counts them", &amqp.QueueDelete{Queue: "a"}, func(t *testing.T, p *peer) {
			ok, isOk := p.ExpectMethod(1).(*amqp.QueueDeleteOk)
			require.True(t, isOk)
			require.Equal(t, uint32(n/2), ok.MessageCount)
		}},
		{"gets find them in order", &amqp.BasicGet{Queue: "a", NoAck: true}, func(t *testing.T, p *peer) {
			for i := 0; i < n; i += 2 {
				if i > 0 {
					p.SendMethod(1, &amqp.BasicGet{Queue: "a", NoAck: true})
				}
				ok, isOk := p.ExpectMethod(1).(*amqp.BasicGetOk)
				require.True(t, isOk)
				require.Equal(t, uint32(n/2-i/2-1), ok.MessageCount)
				p.ReadFrame() // header
				require.Equal(t, fmt.Sprintf("m%03d", i), string(p.ReadFrame().Payload))
			}
			for i := 1; i < n; i += 2 {
				p.SendMethod(1, &amqp.BasicGet{Queue: "b", NoAck: true})
				_, isOk := p.ExpectMethod(1).(*amqp.BasicGetOk)
				require.True(t, isOk)
				p.ReadFrame() // header
				require.Equal(t, fmt.Sprintf("m%03d", i), string(p.ReadFrame().Payload))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startVHostPeer(t, "a", "b")
			p.Send(amqp.AppendMethodFrame(publishes(), 1, tt.then))
			tt.check(t, p)
		})
	}
}

// Confirms of publishes held together come as they would one by one:
// every publish acked, in order, none twice.
func TestHeldPublishesAreConfirmed(t *testing.T) {
	p := startVHostPeer(t, "a", "b")
	p.SendMethod(1, &amqp.ConfirmSelect{})
	_, ok := p.ExpectMethod(1).(*amqp.ConfirmSelectOk)
	require.True(t, ok)
	const n = 600 // more than one hand-off's bound
	var b []byte
	for i := range n {
		b = appendPublish(b, []string{"a", "b", "nowhere"}[i%3], "x")
	}
	p.Send(b)
	var acked uint64
	for acked < n {
		ack, isAck := p.ExpectMethod(1).(*amqp.BasicAck)
		require.True(t, isAck)
		require.Greater(t, ack.DeliveryTag, acked)
		require.True(t, ack.Multiple || ack.DeliveryTag == acked+1, "tag %d after %d", ack.DeliveryTag, acked)
		acked = ack.DeliveryTag
	}
	require.Equal(t, uint64(n), acked)
}

// A message carved out of the read's arena has its own capacity: nothing
// appended through one record reaches the next message's bytes; a message
// with nothing behind it in the read gets its own allocation.
func TestCarveCutsEachMessage(t *testing.T) {
	tests := []struct {
		name     string
		buffered int
		sizes    []int
		carved   bool
	}{
		{"nothing behind it", 0, []int{20}, false},
		{"more behind it", 1000, []int{20, 30, 40}, true},
		{"too large to carve", 1000, []int{maxCarved + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Conn{frames: fakeBuffered(tt.buffered)}
			var got [][]byte
			for _, n := range tt.sizes {
				buf := c.carve(n)
				if !tt.carved {
					require.Nil(t, buf)
					return
				}
				require.Len(t, buf, n)
				require.Equal(t, n, cap(buf))
				got = append(got, buf)
			}
			for i := range got {
				for j := range got[i] {
					got[i][j] = byte(i + 1)
				}
			}
			got[0] = append(got[0], 0xff) // must not reach got[1]
			for i := 1; i < len(got); i++ {
				for _, x := range got[i] {
					require.Equal(t, byte(i+1), x)
				}
			}
			require.LessOrEqual(t, cap(c.arena)+tt.sizes[0]+tt.sizes[1]+tt.sizes[2], tt.sizes[0]+tt.buffered,
				"the arena is no larger than what arrived")
		})
	}
}

// fakeBuffered is a transport.FrameBufferer with n bytes buffered.
type fakeBuffered int

func (f fakeBuffered) FrameBuffered() bool { return f > 0 }
func (f fakeBuffered) Buffered() int       { return int(f) }
