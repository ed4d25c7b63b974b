package broker_test

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
)

// benchReportMedian adds the median of the per-iteration times: start-up costs
// have a long tail (GC, the scheduler), and the targets are medians.
func benchReportMedian(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds()), "median-µs")
}

// BenchmarkStartupBrokertestDial is what a test pays for its own broker:
// brokertest.New (in memory, listening on 127.0.0.1:0), the first
// successful amqp091 dial through the socket-free door, and Close.
func BenchmarkStartupBrokertestDial(b *testing.B) {
	b.ReportAllocs()
	times := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		br := brokertest.New(b)
		conn, err := amqp091.DialConfig(br.URL(), amqp091.Config{Dial: br.Dial})
		if err != nil {
			b.Fatal(err)
		}
		_ = conn.Close()
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	benchReportMedian(b, times)
}

// BenchmarkStartupNewChannel is the embedded path: broker.New in memory,
// one direct Channel, Close.
func BenchmarkStartupNewChannel(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	times := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		br, err := broker.New(broker.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ch, err := br.Channel(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Close(); err != nil {
			b.Fatal(err)
		}
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	benchReportMedian(b, times)
}

// BenchmarkIdleBrokerMemory measures what an idle in-memory broker keeps:
// the live heap and goroutine stacks after a GC, per broker, for a broker
// that only exists (New) and one that also listens (brokertest.New). It
// creates a batch of 50 per iteration so the per-broker figure is not
// noise.
func BenchmarkIdleBrokerMemory(b *testing.B) {
	for _, bc := range []struct {
		name  string
		start func(b *testing.B) *broker.Broker
	}{
		{"New", func(b *testing.B) *broker.Broker {
			br, err := broker.New(broker.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return br
		}},
		{"NewListening", func(b *testing.B) *broker.Broker {
			br, err := broker.New(broker.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := br.Listen("127.0.0.1:0"); err != nil {
				b.Fatal(err)
			}
			return br
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const batch = 50
			var perBroker float64
			for b.Loop() {
				before := benchLiveBytes()
				brokers := make([]*broker.Broker, batch)
				for i := range brokers {
					brokers[i] = bc.start(b)
				}
				after := benchLiveBytes()
				perBroker = float64(after-before) / batch
				for _, br := range brokers {
					_ = br.Close()
				}
			}
			b.ReportMetric(perBroker/1024, "KiB/broker")
		})
	}
}

// benchLiveBytes is the heap in use plus goroutine stacks, after a full GC.
func benchLiveBytes() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// BenchmarkThroughput publishes, consumes and acks one message per op on a
// fresh queue, through each door: the direct Channel, amqp091-go over the
// socket-free Dial, and amqp091-go over TCP on loopback. A publisher and a
// consumer channel (prefetch 256, one ack per message) run concurrently.
func BenchmarkThroughput(b *testing.B) {
	const size = 128
	body := make([]byte, size)
	doors := []struct {
		name string
		open func(b *testing.B, br *broker.Broker) (pub, sub parityChannel)
	}{
		{"direct", func(b *testing.B, br *broker.Broker) (parityChannel, parityChannel) {
			return benchDirectChannel(b, br), benchDirectChannel(b, br)
		}},
		{"pipe", func(b *testing.B, br *broker.Broker) (parityChannel, parityChannel) {
			conn, err := amqp091.DialConfig(br.URL(), amqp091.Config{Dial: br.Dial})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = conn.Close() })
			return benchAMQPChannel(b, conn), benchAMQPChannel(b, conn)
		}},
		{"tcp", func(b *testing.B, br *broker.Broker) (parityChannel, parityChannel) {
			conn, err := amqp091.Dial(br.URL())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = conn.Close() })
			return benchAMQPChannel(b, conn), benchAMQPChannel(b, conn)
		}},
	}
	for _, door := range doors {
		b.Run(door.name, func(b *testing.B) {
			br := brokertest.New(b)
			pub, sub := door.open(b, br)
			if _, err := pub.QueueDeclare("bench", false, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
			if err := sub.Qos(256, 0, false); err != nil {
				b.Fatal(err)
			}
			msgs, err := sub.Consume("bench", "", false, false, false, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(size)
			publishAndAck(b, pub, msgs, body)
		})
	}
}

func benchDirectChannel(b *testing.B, br *broker.Broker) *broker.Channel {
	ch, err := br.Channel(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ch.Close() })
	return ch
}

// publishAndAck publishes b.N messages of body to the queue "bench" on pub
// while a goroutine acks each one msgs delivers, timing from the first
// publish to the last ack.
func publishAndAck(b *testing.B, pub interface {
	PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error
}, msgs <-chan amqp091.Delivery, body []byte) {
	b.ResetTimer()
	n := b.N
	done := make(chan error, 1)
	go func() {
		for range n {
			d := <-msgs
			if err := d.Ack(false); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	ctx := context.Background()
	for range n {
		if err := pub.PublishWithContext(ctx, "", "bench", false, false, amqp091.Publishing{Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
}

func benchAMQPChannel(b *testing.B, conn *amqp091.Connection) *amqp091.Channel {
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	return ch
}

// BenchmarkDirectPublishConsume measures the direct API in process: one
// publisher and one consumer on broker.Channel, one message per op, 12-byte
// bodies, a non-durable queue, measured as messages per second from the
// first publish to the last delivery received. auto-ack is the
// ≥ 1,000,000 msg/s goal, manual-ack (prefetch 256, one Ack per delivery)
// the ≥ 300,000 msg/s goal. The publisher is held at most 4096 messages
// ahead of the consumer (benchPublishConsume's window), as a PerfTest-style
// run is, so the queue's backlog (and the heap) stay bounded whatever b.N is.
func BenchmarkDirectPublishConsume(b *testing.B) {
	for _, bc := range []struct {
		name   string
		settle func(amqp091.Delivery) error // nil: auto-ack
	}{
		{"auto-ack", nil},
		{"manual-ack", func(d amqp091.Delivery) error { return d.Ack(false) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			br, err := broker.New(broker.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = br.Close() })
			benchPublishConsume(b, br, amqp091.Publishing{Body: []byte("hello world!")}, bc.settle)
		})
	}
}

// benchPublishConsume is the timed part of the direct publish/consume
// benchmarks: it declares queue "bench" on br, consumes it on one direct
// channel (prefetch 256 unless auto-ack) and publishes b.N copies of msg to
// it on another, at most 4096 unsettled at a time, settling each delivery
// with settle (nil consumes with auto-ack), and reports msg/s.
func benchPublishConsume(b *testing.B, br *broker.Broker, msg amqp091.Publishing, settle func(amqp091.Delivery) error) {
	const window = 4096
	autoAck := settle == nil
	pub, sub := benchDirectChannel(b, br), benchDirectChannel(b, br)
	if _, err := pub.QueueDeclare("bench", false, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	if !autoAck {
		if err := sub.Qos(256, 0, false); err != nil {
			b.Fatal(err)
		}
	}
	msgs, err := sub.Consume("bench", "", autoAck, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	credit := make(chan struct{}, window)
	for range window {
		credit <- struct{}{}
	}
	b.ReportAllocs()
	n := b.N
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() {
		for range n {
			d := <-msgs
			if !autoAck {
				if err := settle(d); err != nil {
					done <- err
					return
				}
			}
			credit <- struct{}{}
		}
		done <- nil
	}()
	ctx := context.Background()
	for range n {
		<-credit
		if err := pub.PublishWithContext(ctx, "", "bench", false, false, msg); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msg/s")
}
