package broker

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/rates"
)

// BenchmarkRateSampleRound measures one round of the rate sampler over
// 10,000 queues (each queue's counts read, no actor asked): the CPU the
// history costs every StatsInterval.
func BenchmarkRateSampleRound(b *testing.B) {
	br, err := New(Options{StatsInterval: -1})
	require.NoError(b, err)
	defer br.Close()
	ch, err := br.Channel(context.Background())
	require.NoError(b, err)
	for i := range 10_000 {
		_, err := ch.QueueDeclare(fmt.Sprint("q", i), false, false, false, false, nil)
		require.NoError(b, err)
	}
	rec := rates.New(rates.Config{})
	now := time.Now()
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(5 * time.Second)
		br.sampleRound(rec, now)
	}
	objects, _ := rec.Len()
	require.Equal(b, 10_000+3, objects, "the queues, the vhost, the broker and the channel's connection")
}

// The rate sampler and the overview read every queue's counts without
// starting its actor: idle queues keep no goroutine through them, and the
// counts are right.
func TestSamplingWakesNoQueue(t *testing.T) {
	const n = 200
	br, err := New(Options{})
	require.NoError(t, err)
	defer br.Close()
	ch, err := br.Channel(context.Background())
	require.NoError(t, err)
	for i := range n {
		name := fmt.Sprint("q", i)
		_, err := ch.QueueDeclare(name, false, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.PublishWithContext(context.Background(), "", name, false, false, amqp091.Publishing{Body: []byte("x")}))
	}
	require.Equal(t, uint64(n), br.Stats().Ready) // asks every actor: all published
	// The actors exit once idle (0.5-1 s).
	require.Eventually(t, func() bool { return runtime.NumGoroutine() < n/2 }, 10*time.Second, 10*time.Millisecond)
	before := runtime.NumGoroutine()
	br.sampleRound(rates.New(rates.Config{}), time.Now())
	s := br.stats(context.Background(), false)
	require.Equal(t, n, s.Queues)
	require.Equal(t, uint64(n), s.Ready)
	require.Less(t, runtime.NumGoroutine(), before+n/2, "the sampler started the queues' actors")
}
