package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/rates"
)

// BenchmarkRateSampleRound measures one round of the rate sampler over
// 10,000 queues (each asked for its lengths): the CPU the history costs
// every StatsInterval.
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
