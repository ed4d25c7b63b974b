package broker_test

import (
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestQuorum43CountsSurviveRestart: under the 4.3 profile a quorum
// queue's failed-delivery count (x-delivery-count, and the delivery
// limit it feeds) and a delayed retry's hold outlive a restart of the
// broker, as RabbitMQ 4.3 keeps both in the queue's raft log. A message
// out to a consumer when the broker stops counts as a failed delivery
// (its channel was lost).
func TestQuorum43CountsSurviveRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		args amqp091.Table
		// before the restart: rejects with requeue, then whether the
		// last delivery is left unsettled when the broker stops
		rejects int
		holdOut bool
		// after the restart: rejects with requeue, the clock advance
		// before the next get, and what the client sees
		rejectsAfter int
		advance      time.Duration
		want         string
	}{
		{"failed count", nil, 2, false, 0, 0, "dc=2 ac=2"},
		{"out at the stop counts as failed", nil, 1, true, 0, 0, "dc=2 ac=2"},
		{"delivery limit reached across the restart", amqp091.Table{"x-delivery-limit": int32(2)}, 1, false, 2, 0, "gone"},
		{"delayed retry hold: not yet", amqp091.Table{"x-delayed-retry-type": "all", "x-delayed-retry-min": int32(3_600_000)}, 1, false, 0, 30 * time.Minute, "held"},
		{"delayed retry hold: due", amqp091.Table{"x-delayed-retry-type": "all", "x-delayed-retry-min": int32(3_600_000)}, 1, false, 0, 61 * time.Minute, "dc=1 ac=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fake := clock.NewFake(time.Unix(1_700_000_000, 0))
			opts := broker.Options{DataDir: dir, Clock: fake, RabbitMQVersion: "4.3"}
			b := startBroker(t, opts)
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			ch := amqptest.ConfirmChannel(t, conn)
			args := amqp091.Table{"x-queue-type": "quorum"}
			for k, v := range tc.args {
				args[k] = v
			}
			_, err := ch.QueueDeclare("qq", true, false, false, false, args)
			require.NoError(t, err)
			amqptest.PublishMsg(t, ch, "", "qq", amqp091.Publishing{Body: []byte("m"), DeliveryMode: amqp091.Persistent})
			for i := range tc.rejects {
				if i > 0 && tc.args["x-delayed-retry-min"] != nil {
					fake.Advance(time.Duration(i) * time.Hour)
				}
				require.NoError(t, pollGet(t, ch, "qq").Reject(true))
			}
			if tc.holdOut {
				pollGet(t, ch, "qq") // unsettled when the broker stops
			}
			require.NoError(t, conn.Close())
			require.NoError(t, b.Close())

			b2 := startBroker(t, opts)
			conn2 := amqptest.Dial(t, b2.URL(), amqp091.Config{})
			ch2 := amqptest.Channel(t, conn2)
			for range tc.rejectsAfter {
				require.NoError(t, pollGet(t, ch2, "qq").Reject(true))
			}
			fake.Advance(tc.advance)
			got := "held"
			switch {
			case !queueExists(b2, "qq"):
				got = "no queue"
			case tc.want == "gone" || tc.want == "held":
				// Recovery is done when the broker serves: a message
				// wrongly ready is there now.
				d, ok, err := ch2.Get("qq", false)
				require.NoError(t, err)
				switch {
				case ok:
					got = fmt.Sprintf("dc=%v ac=%v", d.Headers["x-delivery-count"], d.Headers["x-acquired-count"])
				case queueStats(t, b2, "qq").Ready == 0 && tc.want == "gone":
					got = "gone"
				}
			default:
				d := pollGet(t, ch2, "qq")
				got = fmt.Sprintf("dc=%v ac=%v", d.Headers["x-delivery-count"], d.Headers["x-acquired-count"])
			}
			require.Equal(t, tc.want, got)
		})
	}
}
