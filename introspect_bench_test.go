package broker

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/metrics"
)

// benchBroker has queues queues of 10 messages each and conns idle
// connections.
func benchBroker(b *testing.B, queues, conns int) *Broker {
	b.Helper()
	br, err := New(Options{})
	require.NoError(b, err)
	b.Cleanup(func() { br.Close() })
	for i := range conns {
		conn, err := amqp091.DialConfig(br.URL(), amqp091.Config{Dial: br.Dial})
		require.NoError(b, err)
		b.Cleanup(func() { conn.Close() })
		if i > 0 {
			continue
		}
		ch, err := conn.Channel()
		require.NoError(b, err)
		for q := range queues {
			name := fmt.Sprint("q", q)
			amqptest.DeclareQueue(b, ch, name, false)
			amqptest.PublishBodies(b, ch, name, false, slices.Repeat([]string{"x"}, 10)...)
		}
	}
	require.NoError(b, br.WaitIdle(context.Background()))
	return br
}

func BenchmarkStats(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("queues=%d", n), func(b *testing.B) {
			br := benchBroker(b, n, 1)
			b.ReportAllocs()
			for b.Loop() {
				if s := br.Stats(context.Background()); s.Queues != n {
					b.Fatalf("%d queues", s.Queues)
				}
			}
		})
	}
}

func BenchmarkMetricsScrape(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("queues=%d", n), func(b *testing.B) {
			br := benchBroker(b, n, 1)
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				s := metricsSource{br}.Snapshot(context.Background())
				metrics.Write(&buf, &s, true)
			}
			b.SetBytes(int64(buf.Len()))
		})
	}
}

// BenchmarkCollectorGather is BenchmarkMetricsScrape through a host's
// registry: the per-object Collector gathered by client_golang.
func BenchmarkCollectorGather(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("queues=%d", n), func(b *testing.B) {
			br := benchBroker(b, n, 1)
			reg := prometheus.NewRegistry()
			reg.MustRegister(br.Collector(CollectorOptions{PerObject: true}))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWaitIdle measures WaitIdle on a broker with nothing to do: two
// passes over every connection and queue.
func BenchmarkWaitIdle(b *testing.B) {
	br := benchBroker(b, 100, 10)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := br.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
