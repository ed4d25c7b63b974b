package session

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/vhost"
)

// startQueuePeer is startPeer with a vhost "/" holding queue q with n
// messages, handshaken, channel 1 open, and the n messages fetched with
// basic.get so delivery tags 1..n are unacked.
func startQueuePeer(t *testing.T, n int) *peer {
	t.Helper()
	p := startVHostPeer(t, "q")
	for range n {
		p.SendMethod(1, &amqp.BasicPublish{RoutingKey: "q"})
		p.SendHeader(1, amqp.ClassBasic, 1)
		p.SendFrame(amqp.FrameBody, 1, []byte("m"))
	}
	for i := range n {
		p.SendMethod(1, &amqp.BasicGet{Queue: "q"})
		ok, isOk := p.ExpectMethod(1).(*amqp.BasicGetOk)
		require.True(t, isOk)
		require.Equal(t, uint64(i+1), ok.DeliveryTag)
		p.ReadFrame() // header
		p.ReadFrame() // body
	}
	return p
}

// startVHostPeer is startPeer with a vhost "/" holding the queues
// named, handshaken, channel 1 open.
func startVHostPeer(t *testing.T, queues ...string) *peer {
	t.Helper()
	vh := testVHost(t)
	cfg := testConfig()
	cfg.VHost = func(name string) (*vhost.VHost, bool) { return vh, name == "/" }
	p := startPeer(t, cfg)
	p.Handshake()
	p.OpenChannel(1)
	for _, q := range queues {
		p.SendMethod(1, &amqp.QueueDeclare{Queue: q})
		_, ok := p.ExpectMethod(1).(*amqp.QueueDeclareOk)
		require.True(t, ok)
	}
	return p
}

// TestSettleUnknownTagMultiple checks RabbitMQ's collect_acks rule for
// ack, nack and reject with and without multiple: the tag itself must be
// unacked (406 "unknown delivery tag N" otherwise, settling nothing), and
// multiple with tag 0 settles all outstanding deliveries, even none.
func TestSettleUnknownTagMultiple(t *testing.T) {
	settles := map[string]func(tag uint64, multiple bool) amqp.Method{
		"ack": func(tag uint64, multiple bool) amqp.Method {
			return &amqp.BasicAck{DeliveryTag: tag, Multiple: multiple}
		},
		"nack": func(tag uint64, multiple bool) amqp.Method {
			return &amqp.BasicNack{DeliveryTag: tag, Multiple: multiple}
		},
	}
	tests := []struct {
		name     string
		got      int      // deliveries outstanding before
		before   []uint64 // single settles sent first
		tag      uint64
		multiple bool
		wantErr  bool
	}{
		{"multiple above every outstanding tag", 2, nil, 5, true, true},
		{"multiple with nothing outstanding", 0, nil, 3, true, true},
		{"multiple of a tag already settled", 3, []uint64{2}, 2, true, true},
		{"single unknown tag", 2, nil, 5, false, true},
		{"multiple tag 0 with nothing outstanding", 0, nil, 0, true, false},
		{"multiple tag 0 settles all", 3, []uint64{2}, 0, true, false},
		{"multiple of an outstanding tag past a gap", 3, []uint64{1}, 3, true, false},
	}
	for kind, settle := range settles {
		for _, tx := range []bool{false, true} {
			for _, tt := range tests {
				name := kind + "/" + tt.name
				if tx {
					name = kind + "/tx/" + tt.name
				}
				t.Run(name, func(t *testing.T) {
					p := startQueuePeer(t, tt.got)
					if tx {
						p.SendMethod(1, &amqp.TxSelect{})
						_, ok := p.ExpectMethod(1).(*amqp.TxSelectOk)
						require.True(t, ok)
					}
					for _, tag := range tt.before {
						p.SendMethod(1, settle(tag, false))
					}
					p.SendMethod(1, settle(tt.tag, tt.multiple))
					// A synchronous method after the settle: its answer
					// shows the settle closed nothing.
					p.SendMethod(1, &amqp.BasicQos{})
					m := p.ExpectMethod(1)
					if !tt.wantErr {
						_, ok := m.(*amqp.BasicQosOk)
						require.True(t, ok, "got %s", m.Name())
						return
					}
					cl, ok := m.(*amqp.ChannelClose)
					require.True(t, ok, "got %s", m.Name())
					require.Equal(t, amqp.PreconditionFailed, cl.ReplyCode)
					require.Equal(t, "PRECONDITION_FAILED - unknown delivery tag "+strconv.FormatUint(tt.tag, 10), cl.ReplyText)
				})
			}
		}
	}
}
