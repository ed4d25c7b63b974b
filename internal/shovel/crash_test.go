package shovel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/shovel"
)

// TestWorkerCrashOnConfirm crashes the source broker, then the destination,
// while an on-confirm shovel drains a queue of persistent messages: every
// message arrives, and each crash duplicates at most the prefetch window.
func TestWorkerCrashOnConfirm(t *testing.T) {
	const n, prefetch = 2000, 50
	src, dst := brokertest.NewLab(t, broker.Options{}), brokertest.NewLab(t, broker.Options{})
	sch := amqptest.ConfirmChannel(t, src.DialAMQP(t, "publisher"))
	amqptest.DeclareQueue(t, sch, "in", true)
	amqptest.PublishConfirmed(t, sch, "in", true, amqptest.Numbered("m", n)...)

	def, err := shovel.Parse(mustJSON(t, map[string]any{
		"src-uri": "amqp://", "src-queue": "in", "dest-uri": dst.URL(), "dest-queue": "out",
		"src-prefetch-count": prefetch, "reconnect-delay": 0.05,
	}))
	require.NoError(t, err)
	w := shovel.NewWorker(def, shovel.Local{User: src.Dial})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	waitForwarded := func(min int64) {
		for w.Status().Forwarded < min {
			require.NoError(t, ctx.Err(), "stuck at %+v", w.Status())
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitForwarded(n / 4)
	require.NoError(t, src.Crash())
	waitForwarded(n / 2)
	require.NoError(t, dst.Crash())

	seen := map[string]int{}
	dch := amqptest.Channel(t, dst.DialAMQP(t, "reader"))
	deliveries, err := dch.Consume("out", "", true, false, false, false, nil)
	require.NoError(t, err)
	for len(seen) < n {
		select {
		case m := <-deliveries:
			seen[string(m.Body)]++
		case <-ctx.Done():
			t.Fatalf("only %d of %d arrived; shovel %+v", len(seen), n, w.Status())
		}
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	// Let anything still in flight land, then count the duplicates.
	for quiet := time.After(300 * time.Millisecond); ; {
		select {
		case m := <-deliveries:
			seen[string(m.Body)]++
			continue
		case <-quiet:
		}
		break
	}
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	require.LessOrEqual(t, dups, 2*prefetch, "two crashes may each redeliver one prefetch window")
	for _, b := range amqptest.Numbered("m", n) {
		require.Contains(t, seen, b)
	}
}
