package shovel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/shovel"
)

// TestWorkerLocalCredentials: a local URI's user and password are the
// ones its in-process connections log in with (amqp://ops:ops@/), and
// a local URI without any, on a broker with no guest, is refused at
// login and says so in the link's reason instead of moving anything.
func TestWorkerLocalCredentials(t *testing.T) {
	b, err := broker.New(broker.Options{Users: []broker.User{{Name: "ops", Password: "ops", Tags: []string{"administrator"}}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	ch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, b.Dial, "ops", "test"))
	amqptest.DeclareQueue(t, ch, "in", true)
	amqptest.PublishConfirmed(t, ch, "in", true, amqptest.Numbered("m", 10)...)

	for _, tc := range []struct {
		name, uri string
		refused   bool
	}{
		{"named user", "amqp://ops:ops@/%2F", false},
		{"no user, no guest", "amqp:///%2F", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def, err := shovel.Parse(mustJSON(t, map[string]any{
				"src-uri": tc.uri, "src-queue": "in", "dest-uri": tc.uri, "dest-queue": "out",
				"src-delete-after": "queue-length", "reconnect-delay": 0.05,
			}))
			require.NoError(t, err)
			w := shovel.NewWorker(def, shovel.Local{User: b.Dial})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if !tc.refused {
				require.ErrorIs(t, w.Run(ctx), shovel.ErrDone)
				require.Equal(t, amqptest.Numbered("m", 10), amqptest.GetAll(t, ch, "out"))
				return
			}
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			amqptest.Poll(t, func() bool { return strings.Contains(w.Status().Reason, "403") }, "link reason %q never names the refused login", w.Status().Reason)
			require.Equal(t, shovel.Starting, w.Status().State)
			require.Zero(t, w.Status().Forwarded)
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		})
	}
}
