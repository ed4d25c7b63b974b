package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
)

// BenchmarkEngine measures publish+consume throughput through amqp091-go:
// one publisher and one consumer channel run concurrently on a fresh
// queue, one message (128 bytes) per op. Modes: auto-ack consumer; manual
// ack (prefetch 256, one ack per message); persistent messages to a
// durable queue on Pebble (DataDir) with publisher confirms, the publisher
// keeping up to 512 publishes unconfirmed. Doors: TCP on loopback, and
// in-process over Broker.Dial. msgs/s is reported; allocs/op count the
// client's allocations as well as the broker's (BenchmarkEngineRaw counts
// the broker's alone).
func BenchmarkEngine(b *testing.B) {
	modes := []struct {
		name       string
		autoAck    bool
		persistent bool
	}{
		{"autoack", true, false},
		{"ack", false, false},
		{"persistent-confirm", false, true},
	}
	doors := []struct {
		name string
		dial func(b *testing.B, br *Broker) *amqp091.Connection
	}{
		{"tcp", func(b *testing.B, br *Broker) *amqp091.Connection {
			return benchDial(b, br.URL(), amqp091.Config{})
		}},
		{"pipe", func(b *testing.B, br *Broker) *amqp091.Connection {
			return benchDial(b, br.URL(), amqp091.Config{Dial: br.Dial})
		}},
	}
	for _, door := range doors {
		for _, mode := range modes {
			b.Run(door.name+"/"+mode.name, func(b *testing.B) {
				opts := Options{}
				if mode.persistent {
					opts.DataDir = b.TempDir()
				}
				br := benchBroker(b, opts)
				pubConn, subConn := door.dial(b, br), door.dial(b, br)
				pub, sub := benchChannel(b, pubConn), benchChannel(b, subConn)
				if _, err := pub.QueueDeclare("bench", mode.persistent, false, false, false, nil); err != nil {
					b.Fatal(err)
				}
				var confirms chan amqp091.Confirmation
				if mode.persistent {
					if err := pub.Confirm(false); err != nil {
						b.Fatal(err)
					}
					confirms = pub.NotifyPublish(make(chan amqp091.Confirmation, 1024))
				}
				if err := sub.Qos(256, 0, false); err != nil {
					b.Fatal(err)
				}
				msgs, err := sub.Consume("bench", "", mode.autoAck, false, false, false, nil)
				if err != nil {
					b.Fatal(err)
				}
				msg := amqp091.Publishing{Body: make([]byte, 128)}
				if mode.persistent {
					msg.DeliveryMode = amqp091.Persistent
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(msg.Body)))
				b.ResetTimer()
				n := b.N
				consumed := make(chan error, 1)
				go func() {
					for range n {
						d, ok := <-msgs
						if !ok {
							consumed <- io.ErrUnexpectedEOF
							return
						}
						if !mode.autoAck {
							if err := d.Ack(false); err != nil {
								consumed <- err
								return
							}
						}
					}
					consumed <- nil
				}()
				ctx := context.Background()
				const window = 512
				outstanding := 0
				for range n {
					if confirms != nil && outstanding == window {
						if c := <-confirms; !c.Ack {
							b.Fatal("nack")
						}
						outstanding--
					}
					if err := pub.PublishWithContext(ctx, "", "bench", false, false, msg); err != nil {
						b.Fatal(err)
					}
					outstanding++
				}
				for confirms != nil && outstanding > 0 {
					if c := <-confirms; !c.Ack {
						b.Fatal("nack")
					}
					outstanding--
				}
				if err := <-consumed; err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkEngineRaw is the auto-ack path over TCP with a client that
// allocates nothing: pre-encoded publish frames in, deliveries counted off
// the socket by frame headers. allocs/op is the broker's per message.
func BenchmarkEngineRaw(b *testing.B) {
	for _, mode := range []struct {
		name  string
		noAck bool
	}{{"autoack", true}, {"ack", false}} {
		b.Run(mode.name, func(b *testing.B) {
			br := benchBroker(b, Options{})
			pub := benchRawClient(b, br)
			sub := benchRawClient(b, br)
			pub.call(&amqp.QueueDeclare{Queue: "raw"})
			sub.call(&amqp.BasicQos{PrefetchCount: 256})
			sub.call(&amqp.BasicConsume{Queue: "raw", ConsumerTag: "c", NoAck: mode.noAck})

			// One batch of publishes, written with one Write per batch.
			const batch = 64
			body := make([]byte, 128)
			props := (&amqp.Properties{}).Append(nil)
			var frames []byte
			for range batch {
				frames = amqp.AppendMethodFrame(frames, 1, &amqp.BasicPublish{RoutingKey: "raw"})
				frames = amqp.AppendHeaderFrame(frames, 1, amqp.ClassBasic, uint64(len(body)), props)
				frames = amqp.AppendFrame(frames, amqp.FrameBody, 1, body)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			n := b.N
			consumed := make(chan error, 1)
			go func() { consumed <- sub.countDeliveries(n, !mode.noAck) }()
			for sent := 0; sent < n; sent += batch {
				k := min(batch, n-sent)
				// Each publish is 3 frames of fixed size: cut the batch.
				if _, err := pub.nc.Write(frames[:k*len(frames)/batch]); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-consumed; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

func benchBroker(b *testing.B, opts Options) *Broker {
	b.Helper()
	br, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := br.Listen("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Close() })
	return br
}

func benchDial(b *testing.B, url string, cfg amqp091.Config) *amqp091.Connection {
	b.Helper()
	conn, err := amqp091.DialConfig(url, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn
}

func benchChannel(b *testing.B, conn *amqp091.Connection) *amqp091.Channel {
	b.Helper()
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	return ch
}

// benchRawClientT is a handshaken connection with channel 1 open.
type benchRawClientT struct {
	b  *testing.B
	nc net.Conn
	br *bufio.Reader
	fr *amqp.FrameReader
}

func benchRawClient(b *testing.B, br *Broker) *benchRawClientT {
	b.Helper()
	nc, err := net.Dial("tcp", br.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	c := &benchRawClientT{b: b, nc: nc, br: bufio.NewReaderSize(nc, 1<<16)}
	c.fr = amqp.NewFrameReader(c.br)
	c.write([]byte("AMQP\x00\x00\x09\x01"))
	c.expect() // start
	c.send(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	tune := c.expect().(*amqp.ConnectionTune)
	c.send(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	c.send(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	c.expect() // open-ok
	c.call(&amqp.ChannelOpen{})
	return c
}

func (c *benchRawClientT) write(p []byte) {
	if _, err := c.nc.Write(p); err != nil {
		c.b.Fatal(err)
	}
}

func (c *benchRawClientT) send(ch uint16, m amqp.Method) {
	c.write(amqp.AppendMethodFrame(nil, ch, m))
}

// expect reads the next method frame, skipping heartbeats.
func (c *benchRawClientT) expect() amqp.Method {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.b.Fatal(err)
		}
		if f.Type != amqp.FrameMethod {
			continue
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			c.b.Fatal(err)
		}
		return m
	}
}

// call sends m on channel 1 and waits for its reply.
func (c *benchRawClientT) call(m amqp.Method) {
	c.send(1, m)
	c.expect()
}

// countDeliveries reads frames off the socket until n basic.deliver
// arrived, acking each one (multiple=false, as most clients do) when ack is
// set; the acks are written 32 at a time. It parses only frame headers and
// the delivery tag, so it allocates nothing.
func (c *benchRawClientT) countDeliveries(n int, ack bool) error {
	var hdr [7]byte
	acks := make([]byte, 0, 64*32)
	got := 0
	for got < n {
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			return err
		}
		size := int(binary.BigEndian.Uint32(hdr[3:]))
		payload, err := c.br.Peek(size + 1)
		if err != nil {
			return err
		}
		if hdr[0] == amqp.FrameMethod && size >= 4 &&
			binary.BigEndian.Uint16(payload) == amqp.ClassBasic && binary.BigEndian.Uint16(payload[2:]) == amqp.MethodBasicDeliver {
			got++
			if ack {
				// consumer-tag shortstr, then the delivery tag.
				tagAt := 4 + 1 + int(payload[4])
				tag := binary.BigEndian.Uint64(payload[tagAt:])
				acks = (&amqp.BasicAck{DeliveryTag: tag}).AppendFrame(acks, 1)
				if got%32 == 0 || got == n {
					if _, err := c.nc.Write(acks); err != nil {
						return err
					}
					acks = acks[:0]
				}
			}
		}
		if _, err := c.br.Discard(size + 1); err != nil {
			return err
		}
	}
	return nil
}
