package amqp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// The interop test runs the real amqp091-go client against a scripted server built
// from this package, over net.Pipe: the client's encoder checks our decoders and its
// decoder checks our encoders, for the handshake, tables of every type, content
// properties, body frames split at frame-max, and server-sent basic.ack.

// peer is the server side of the script. It reports failures as errors: it runs off
// the test goroutine.
type peer struct {
	conn net.Conn
	fr   *FrameReader
	out  []byte
}

func (p *peer) send(channel uint16, m Method) error {
	p.out = AppendMethodFrame(p.out[:0], channel, m)
	_, err := p.conn.Write(p.out)
	return err
}

func (p *peer) sendContent(channel uint16, m Method, props Properties, body []byte, frameMax uint32) error {
	p.out = AppendMethodFrame(p.out[:0], channel, m)
	p.out = AppendHeaderFrame(p.out, channel, ClassBasic, uint64(len(body)), props.Append(nil))
	p.out = AppendBodyFrames(p.out, channel, body, frameMax)
	_, err := p.conn.Write(p.out)
	return err
}

// recv reads the next frame, which must be the method m is, and decodes it into m.
func (p *peer) recv(channel uint16, m Method) error {
	f, err := p.fr.ReadFrame()
	if err != nil {
		return err
	}
	if f.Type != FrameMethod || f.Channel != channel {
		return fmt.Errorf("want %s on channel %d, got frame type %d on channel %d", m.Name(), channel, f.Type, f.Channel)
	}
	classID, methodID, args, err := MethodIDs(f.Payload)
	if err != nil {
		return err
	}
	if classID != m.ClassID() || methodID != m.MethodID() {
		return fmt.Errorf("want %s, got %s", m.Name(), methodName(classID, methodID))
	}
	return m.DecodeArgs(args)
}

// recvContent reads a header frame and body frames.
func (p *peer) recvContent(channel uint16) (Properties, []byte, error) {
	f, err := p.fr.ReadFrame()
	if err != nil {
		return Properties{}, nil, err
	}
	if f.Type != FrameHeader {
		return Properties{}, nil, fmt.Errorf("want a header frame, got type %d", f.Type)
	}
	h, err := ParseContentHeader(f.Payload)
	if err != nil {
		return Properties{}, nil, err
	}
	props, err := DecodeProperties(h.Properties)
	if err != nil {
		return Properties{}, nil, err
	}
	var body []byte
	for uint64(len(body)) < h.BodySize {
		f, err := p.fr.ReadFrame()
		if err != nil {
			return Properties{}, nil, err
		}
		if f.Type != FrameBody || f.Channel != channel {
			return Properties{}, nil, fmt.Errorf("want a body frame, got type %d", f.Type)
		}
		if len(f.Payload) > FrameMinSize-8 {
			return Properties{}, nil, fmt.Errorf("client ignored frame-max: %d octets", len(f.Payload))
		}
		body = append(body, f.Payload...)
	}
	return props, body, nil
}

// seen is what the scripted server received from the client.
type seen struct {
	startOk   ConnectionStartOk
	tuneOk    ConnectionTuneOk
	open      ConnectionOpen
	declare   QueueDeclare
	publish   BasicPublish
	props     Properties
	body      []byte
	consume   BasicConsume
	connClose ConnectionClose
}

func serve(conn net.Conn, delivery Properties, deliveryBody []byte) (*seen, error) {
	p := &peer{conn: conn, fr: NewFrameReader(conn)}
	p.fr.SetMaxFrameSize(FrameMinSize)
	s := &seen{}
	hdr, err := p.fr.ReadProtocolHeader()
	if err != nil {
		return s, err
	}
	if hdr != [8]byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1} {
		return s, fmt.Errorf("protocol header %q", hdr[:])
	}
	steps := []func() error{
		func() error {
			return p.send(0, &ConnectionStart{
				VersionMajor: 0, VersionMinor: 9,
				ServerProperties: Table{"product": "warren-test", "capabilities": Table{"publisher_confirms": true, "basic.nack": true}},
				Mechanisms:       "PLAIN AMQPLAIN", Locales: "en_US",
			})
		},
		func() error { return p.recv(0, &s.startOk) },
		func() error { return p.send(0, &ConnectionTune{ChannelMax: 16, FrameMax: FrameMinSize, Heartbeat: 0}) },
		func() error { return p.recv(0, &s.tuneOk) },
		func() error { return p.recv(0, &s.open) },
		func() error { return p.send(0, &ConnectionOpenOk{}) },
		func() error { return p.recv(1, &ChannelOpen{}) },
		func() error { return p.send(1, &ChannelOpenOk{}) },
		func() error { return p.recv(1, &ConfirmSelect{}) },
		func() error { return p.send(1, &ConfirmSelectOk{}) },
		func() error { return p.recv(1, &s.declare) },
		func() error {
			return p.send(1, &QueueDeclareOk{Queue: s.declare.Queue, MessageCount: 7, ConsumerCount: 1})
		},
		func() error { return p.recv(1, &s.publish) },
		func() (err error) { s.props, s.body, err = p.recvContent(1); return err },
		func() error { return p.send(1, &BasicAck{DeliveryTag: 1}) },
		func() error { return p.recv(1, &s.consume) },
		// amqp091-go names its consumers itself and dispatches deliveries by that tag.
		func() error { return p.send(1, &BasicConsumeOk{ConsumerTag: s.consume.ConsumerTag}) },
		func() error {
			return p.sendContent(1, &BasicDeliver{ConsumerTag: s.consume.ConsumerTag, DeliveryTag: 99, Redelivered: true, Exchange: "ex", RoutingKey: "rk"},
				delivery, deliveryBody, FrameMinSize)
		},
		func() error { return p.recv(0, &s.connClose) },
		func() error { return p.send(0, &ConnectionCloseOk{}) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return s, fmt.Errorf("step %d: %w", i, err)
		}
	}
	return s, nil
}

// fromClient converts amqp091-go table values to ours (times to UTC, nested tables).
func fromClient(v any) any {
	switch v := v.(type) {
	case amqp091.Table:
		t := Table{}
		for k, e := range v {
			t[k] = fromClient(e)
		}
		return t
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = fromClient(e)
		}
		return a
	case amqp091.Decimal:
		return Decimal(v)
	case time.Time:
		return v.UTC()
	}
	return v
}

// toClient converts our values to amqp091-go's.
func toClient(v any) any {
	switch v := v.(type) {
	case Table:
		t := amqp091.Table{}
		for k, e := range v {
			t[k] = toClient(e)
		}
		return t
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = toClient(e)
		}
		return a
	case Decimal:
		return amqp091.Decimal(v)
	}
	return v
}

func TestInteropAmqp091(t *testing.T) {
	clientConn, serverConn := net.Pipe()
	deliveryProps := allProperties()
	deliveryProps.Headers = everyType()
	deliveryBody := bytes.Repeat([]byte("deliver "), 2000) // 16000 octets: four body frames

	type result struct {
		s   *seen
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := serve(serverConn, deliveryProps, deliveryBody)
		serverConn.Close()
		done <- result{s, err}
	}()

	conn, err := amqp091.Open(clientConn, amqp091.Config{
		SASL:       []amqp091.Authentication{&amqp091.PlainAuth{Username: "guest", Password: "secret"}},
		Vhost:      "/vh",
		Locale:     "en_US",
		Properties: amqp091.Table{"connection_name": "interop"},
	})
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))

	args := toClient(everyType()).(amqp091.Table)
	q, err := ch.QueueDeclare("jobs", true, false, false, false, args)
	require.NoError(t, err)
	require.Equal(t, amqp091.Queue{Name: "jobs", Messages: 7, Consumers: 1}, q)

	pub := amqp091.Publishing{
		Headers:         amqp091.Table{"k": "v", "n": int32(1), "nested": amqp091.Table{"deep": []any{int64(2), "x"}}},
		ContentType:     "text/plain",
		ContentEncoding: "utf-8",
		DeliveryMode:    amqp091.Persistent,
		Priority:        5,
		CorrelationId:   "c-1",
		ReplyTo:         "replies",
		Expiration:      "1000",
		MessageId:       "m-1",
		Timestamp:       time.Unix(1700000000, 0),
		Type:            "t",
		UserId:          "guest",
		AppId:           "app",
		Body:            bytes.Repeat([]byte("publish "), 1500), // 12000 octets: three body frames
	}
	require.NoError(t, ch.PublishWithContext(context.Background(), "ex", "rk", true, false, pub))
	require.Equal(t, amqp091.Confirmation{DeliveryTag: 1, Ack: true}, <-confirms)

	deliveries, err := ch.Consume("jobs", "", false, true, false, false, amqp091.Table{"x-priority": int32(3)})
	require.NoError(t, err)
	d := <-deliveries
	require.Equal(t, deliveryBody, d.Body)
	require.NotEmpty(t, d.ConsumerTag)
	require.Equal(t, uint64(99), d.DeliveryTag)
	require.True(t, d.Redelivered)
	require.Equal(t, "ex", d.Exchange)
	require.Equal(t, "rk", d.RoutingKey)
	require.Equal(t, Properties{
		ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, Headers: fromClient(d.Headers).(Table),
		DeliveryMode: d.DeliveryMode, Priority: d.Priority, CorrelationID: d.CorrelationId, ReplyTo: d.ReplyTo,
		Expiration: d.Expiration, MessageID: d.MessageId, Timestamp: d.Timestamp.UTC(), Type: d.Type,
		UserID: d.UserId, AppID: d.AppId, ClusterID: deliveryProps.ClusterID, // amqp091-go drops cluster-id
	}, deliveryProps)

	require.NoError(t, conn.Close())
	res := <-done
	require.NoError(t, res.err)
	s := res.s

	require.Equal(t, "PLAIN", s.startOk.Mechanism)
	require.Equal(t, "\x00guest\x00secret", s.startOk.Response)
	require.Equal(t, "en_US", s.startOk.Locale)
	require.Equal(t, "interop", s.startOk.ClientProperties["connection_name"])
	require.IsType(t, Table{}, s.startOk.ClientProperties["capabilities"])
	require.Equal(t, ConnectionTuneOk{ChannelMax: 16, FrameMax: FrameMinSize, Heartbeat: 0}, s.tuneOk)
	require.Equal(t, "/vh", s.open.VirtualHost)

	require.Equal(t, "jobs", s.declare.Queue)
	require.True(t, s.declare.Durable)
	require.False(t, s.declare.Passive || s.declare.Exclusive || s.declare.AutoDelete || s.declare.NoWait)
	require.Equal(t, fromClient(args), s.declare.Arguments)

	require.Equal(t, BasicPublish{Exchange: "ex", RoutingKey: "rk", Mandatory: true}, s.publish)
	require.Equal(t, pub.Body, s.body)
	require.Equal(t, Properties{
		ContentType: pub.ContentType, ContentEncoding: pub.ContentEncoding, Headers: fromClient(pub.Headers).(Table),
		DeliveryMode: pub.DeliveryMode, Priority: pub.Priority, CorrelationID: pub.CorrelationId, ReplyTo: pub.ReplyTo,
		Expiration: pub.Expiration, MessageID: pub.MessageId, Timestamp: pub.Timestamp.UTC(), Type: pub.Type,
		UserID: pub.UserId, AppID: pub.AppId,
	}, s.props)

	require.Equal(t, BasicConsume{Queue: "jobs", ConsumerTag: s.consume.ConsumerTag, NoAck: false, Exclusive: true,
		Arguments: Table{"x-priority": int32(3)}}, s.consume)
	require.NotEmpty(t, s.consume.ConsumerTag)
	require.Equal(t, s.consume.ConsumerTag, d.ConsumerTag)
	require.Equal(t, ReplySuccess, s.connClose.ReplyCode)
}
