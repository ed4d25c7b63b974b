package shovel_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/shovel"
)

// TestWorkerWarrenToWarren moves a queue from one in-process broker (the
// local "amqp://", through Broker.Dial) to another over TCP, in each ack
// mode, with src-delete-after ending the link.
func TestWorkerWarrenToWarren(t *testing.T) {
	for _, tc := range []struct {
		ack         string
		deleteAfter any
		publish     int
		want        int // messages moved
	}{
		{shovel.OnConfirm, "queue-length", 50, 50},
		{shovel.OnPublish, "queue-length", 50, 50},
		{shovel.NoAck, "queue-length", 50, 50},
		{shovel.OnConfirm, 20, 50, 20},
		{shovel.OnPublish, 20, 50, 20},
	} {
		t.Run(tc.ack+"/"+jsonString(tc.deleteAfter), func(t *testing.T) {
			src, dst := brokertest.New(t), brokertest.New(t)
			sch := amqptest.ConfirmChannel(t, brokertest.Dial(t, src))
			amqptest.DeclareQueue(t, sch, "in", true)
			amqptest.PublishConfirmed(t, sch, "in", true, amqptest.Numbered("m", tc.publish)...)
			def, err := shovel.Parse(mustJSON(t, map[string]any{
				"src-uri": "amqp://", "src-queue": "in",
				"dest-uri": dst.URL(), "dest-queue": "out",
				"ack-mode": tc.ack, "src-delete-after": tc.deleteAfter, "src-prefetch-count": 7,
			}))
			require.NoError(t, err)
			w := shovel.NewWorker(def, shovel.Local{User: src.Dial})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.ErrorIs(t, w.Run(ctx), shovel.ErrDone)
			require.Equal(t, shovel.Terminated, w.Status().State)
			require.Equal(t, int64(tc.want), w.Status().Forwarded)

			dch := amqptest.Channel(t, brokertest.Dial(t, dst))
			require.Equal(t, amqptest.Numbered("m", tc.publish)[:tc.want], amqptest.GetAll(t, dch, "out"))
			left := amqptest.GetAll(t, amqptest.Channel(t, brokertest.Dial(t, src)), "in")
			require.Equal(t, amqptest.Numbered("m", tc.publish)[tc.want:], append([]string{}, left...))
		})
	}
}

// TestWorkerReconnects: the destination goes away mid-stream and comes back
// on another broker URI in the list; in on-confirm mode nothing is lost.
func TestWorkerReconnects(t *testing.T) {
	src, dst := brokertest.New(t), brokertest.New(t)
	sch := amqptest.ConfirmChannel(t, brokertest.Dial(t, src))
	amqptest.DeclareQueue(t, sch, "in", true)
	def, err := shovel.Parse(mustJSON(t, map[string]any{
		"src-uri": "amqp://", "src-queue": "in",
		"dest-uri": []string{"amqp://guest:guest@127.0.0.1:1/", dst.URL()}, "dest-queue": "out",
		"reconnect-delay": 0.05, "src-delete-after": 30,
	}))
	require.NoError(t, err)
	w := shovel.NewWorker(def, shovel.Local{User: src.Dial})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	amqptest.PublishConfirmed(t, sch, "in", true, amqptest.Numbered("m", 30)...)
	select {
	case err := <-done:
		require.True(t, errors.Is(err, shovel.ErrDone), "%v", err)
	case <-ctx.Done():
		t.Fatalf("shovel did not finish: %+v", w.Status())
	}
	got := amqptest.GetAll(t, amqptest.Channel(t, brokertest.Dial(t, dst)), "out")
	require.Equal(t, amqptest.Numbered("m", 30), got)
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }
