package broker_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
)

// BenchmarkEventsPublishConsume is what events cost the message path:
// direct publish and consume (prefetch 256), each delivery acked, or
// rejected without requeue, which makes it a MessageDeadLettered event
// (the queue has no dead-letter exchange). "none" has no subscriber (the
// sources' guard is one atomic load), "reading" one that keeps up,
// "full" one that never reads, so every event is counted and dropped.
func BenchmarkEventsPublishConsume(b *testing.B) {
	const window = 4096
	body := []byte("hello world!")
	for _, settle := range []string{"ack", "reject"} {
		for _, sub := range []string{"none", "reading", "full"} {
			b.Run(settle+"/subscriber="+sub, func(b *testing.B) {
				br, err := broker.New(broker.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = br.Close() })
				ctx, cancel := context.WithCancel(context.Background())
				b.Cleanup(cancel)
				switch sub {
				case "reading":
					evs := br.Events(ctx, 0)
					go func() {
						for range evs {
						}
					}()
				case "full":
					_ = br.Events(ctx, 1)
				}
				pub, cons := benchDirectChannel(b, br), benchDirectChannel(b, br)
				if _, err := pub.QueueDeclare("bench", false, false, false, false, nil); err != nil {
					b.Fatal(err)
				}
				if err := cons.Qos(256, 0, false); err != nil {
					b.Fatal(err)
				}
				msgs, err := cons.Consume("bench", "", false, false, false, false, nil)
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
						var err error
						if settle == "ack" {
							err = d.Ack(false)
						} else {
							err = d.Reject(false)
						}
						if err != nil {
							done <- err
							return
						}
						credit <- struct{}{}
					}
					done <- nil
				}()
				msg := amqp091.Publishing{Body: body, MessageId: "m"}
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
			})
		}
	}
}
