package broker_test

import (
	"encoding/binary"
	"github.com/warrenmq/broker"
	"testing"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/measure"
)

// BenchmarkGetRoundTrip is perftest's get scenario in one process, over a
// loopback socket with a client that allocates nothing: one basic.get per
// op, answered get-empty (empty) or with a message the op then acks
// (message, the queue filled before the timer starts). It is the round trip
// the reader's in-place replies and the raw socket path are for; cpu-ns/op
// is the process's CPU (client included).
func BenchmarkGetRoundTrip(b *testing.B) {
	for _, withMessage := range []bool{false, true} {
		name := "empty"
		if withMessage {
			name = "message"
		}
		b.Run(name, func(b *testing.B) {
			br := startBroker(b, broker.Options{})
			c := benchRawClient(b, br)
			c.call(&amqp.QueueDeclare{Queue: "get"})
			if withMessage {
				props := (&amqp.Properties{}).Append(nil)
				var pub []byte
				pub = amqp.AppendMethodFrame(pub, 1, &amqp.BasicPublish{RoutingKey: "get"})
				pub = amqp.AppendHeaderFrame(pub, 1, amqp.ClassBasic, 12, props)
				pub = amqp.AppendFrame(pub, amqp.FrameBody, 1, make([]byte, 12))
				for range b.N {
					c.write(pub)
				}
				c.call(&amqp.QueueDeclare{Queue: "get", Passive: true}) // after every publish
			}
			get := amqp.AppendMethodFrame(nil, 1, &amqp.BasicGet{Queue: "get"})
			ack := make([]byte, 0, 64)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := measure.ProcessCPU()
			for range b.N {
				c.write(get)
				f, err := c.fr.ReadFrame()
				if err != nil {
					b.Fatal(err)
				}
				if !withMessage {
					continue
				}
				if len(f.Payload) < 12 || binary.BigEndian.Uint16(f.Payload[2:]) != amqp.MethodBasicGetOk {
					b.Fatalf("want basic.get-ok, got %x", f.Payload)
				}
				tag := binary.BigEndian.Uint64(f.Payload[4:])
				for _, want := range []uint8{amqp.FrameHeader, amqp.FrameBody} {
					if f, err = c.fr.ReadFrame(); err != nil || f.Type != want {
						b.Fatal(f.Type, err)
					}
				}
				ack = (&amqp.BasicAck{DeliveryTag: tag}).AppendFrame(ack[:0], 1)
				c.write(ack)
			}
			b.ReportMetric(float64(measure.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
