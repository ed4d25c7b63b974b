package amqp_test

import (
	"bytes"
	"fmt"

	"github.com/warrenmq/broker/amqp"
)

// A publish as a client sends it: method, content header and body frames, read back
// and dispatched without allocating per frame.
func Example() {
	props := amqp.Properties{ContentType: "text/plain", DeliveryMode: 2}
	body := []byte("hello")
	var wire []byte
	wire = amqp.AppendMethodFrame(wire, 1, &amqp.BasicPublish{Exchange: "", RoutingKey: "jobs"})
	wire = amqp.AppendHeaderFrame(wire, 1, amqp.ClassBasic, uint64(len(body)), props.Append(nil))
	wire = amqp.AppendBodyFrames(wire, 1, body, amqp.FrameMinSize)

	fr := amqp.NewFrameReader(bytes.NewReader(wire))
	fr.SetMaxFrameSize(amqp.FrameMinSize)
	var pub amqp.BasicPublish
	for range 3 {
		f, err := fr.ReadFrame()
		if err != nil {
			fmt.Println(err)
			return
		}
		switch f.Type {
		case amqp.FrameMethod:
			classID, methodID, args, _ := amqp.MethodIDs(f.Payload)
			if classID == amqp.ClassBasic && methodID == amqp.MethodBasicPublish {
				_ = pub.DecodeArgs(args)
				fmt.Printf("publish to %q\n", pub.RoutingKey)
			}
		case amqp.FrameHeader:
			h, _ := amqp.ParseContentHeader(f.Payload)
			s, _ := amqp.SummarizeProperties(h.Properties)
			fmt.Printf("%d octets, delivery mode %d\n", h.BodySize, s.DeliveryMode)
		case amqp.FrameBody:
			fmt.Printf("body %q\n", f.Payload)
		}
	}
	// Output:
	// publish to "jobs"
	// 5 octets, delivery mode 2
	// body "hello"
}

func ExampleNewError() {
	err := amqp.NewError(amqp.NotFound, amqp.ClassQueue, amqp.MethodQueueDeclare, "no queue '%s' in vhost '%s'", "jobs", "/")
	fmt.Println(err)
	fmt.Println(err.Hard())
	fmt.Printf("%T\n", err.CloseMethod())
	// Output:
	// amqp: 404 NOT_FOUND - no queue 'jobs' in vhost '/' (queue.declare)
	// false
	// *amqp.ChannelClose
}

func ExampleDecodeMethod() {
	payload := amqp.AppendMethod(nil, &amqp.QueueDeclare{Queue: "jobs", Durable: true, Arguments: amqp.Table{"x-max-length": 1000}})
	m, err := amqp.DecodeMethod(payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	q := m.(*amqp.QueueDeclare)
	fmt.Println(m.Name(), q.Queue, q.Durable, q.Arguments["x-max-length"])

	_, err = amqp.DecodeMethod([]byte{0, 60, 0, 99})
	fmt.Println(err)
	// Output:
	// queue.declare jobs true 1000
	// amqp: 503 COMMAND_INVALID - unknown method: class 60, method 99
}
