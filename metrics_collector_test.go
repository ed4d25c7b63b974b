package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestCollectorWakesNoQueue: once the queues' actors have gone idle, a
// host registry's Gather of the per-object collector starts none of them
// (it reads what each queue published, as MetricsHandler does), and
// still reports each queue's messages.
func TestCollectorWakesNoQueue(t *testing.T) {
	b, err := New(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	conn, err := amqp091.DialConfig(b.URL(), amqp091.Config{Dial: b.Dial})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch := amqptest.Channel(t, conn)
	const n = 50
	for i := range n {
		name := fmt.Sprint("q", i)
		amqptest.DeclareQueue(t, ch, name, false)
		amqptest.PublishBodies(t, ch, name, false, "x")
	}
	require.NoError(t, b.WaitIdle(context.Background()))
	running := func() int {
		r := 0
		for _, vh := range b.sortedVHosts() {
			for _, q := range vh.Queues() {
				if _, on := q.Sampled(); on {
					r++
				}
			}
		}
		return r
	}
	require.Eventually(t, func() bool { return running() == 0 }, 10*time.Second, 10*time.Millisecond, "idle actors exit")

	reg := prometheus.NewRegistry()
	reg.MustRegister(b.Collector(CollectorOptions{PerObject: true}))
	fams, err := reg.Gather()
	require.NoError(t, err)
	require.Zero(t, running(), "the Gather started no queue's actor")
	for _, f := range fams {
		if f.GetName() == "rabbitmq_queue_messages_ready" {
			require.Len(t, f.GetMetric(), n)
			for _, m := range f.GetMetric() {
				require.Equal(t, float64(1), m.GetGauge().GetValue())
			}
			return
		}
	}
	t.Fatal("no rabbitmq_queue_messages_ready")
}
