package broker_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// Streams over AMQP 0-9-1 (x-queue-type stream), as RabbitMQ 4.x serves
// them: docs/streams.md.

var streamArgs = amqp091.Table{"x-queue-type": "stream"}

// declareStream declares a durable stream with extra arguments.
func declareStream(t testing.TB, ch *amqp091.Channel, name string, extra amqp091.Table) {
	t.Helper()
	args := amqp091.Table{"x-queue-type": "stream"}
	for k, v := range extra {
		args[k] = v
	}
	_, err := ch.QueueDeclare(name, true, false, false, false, args)
	require.NoError(t, err)
}

// publishStream publishes bodies to the stream with confirms and waits for
// every confirm, headers on each when given.
func publishStream(t testing.TB, ch *amqp091.Channel, name string, headers amqp091.Table, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		amqptest.PublishMsg(t, ch, "", name, amqp091.Publishing{Body: []byte(body), Headers: headers})
	}
}

// streamReader consumes a stream on its own channel with prefetch and the
// given consumer arguments.
func streamReader(t testing.TB, conn *amqp091.Connection, name string, prefetch int, args amqp091.Table) (*amqp091.Channel, <-chan amqp091.Delivery) {
	t.Helper()
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.Qos(prefetch, 0, false))
	ds, err := ch.Consume(name, "", false, false, false, false, args)
	require.NoError(t, err)
	return ch, ds
}

// readN receives n deliveries, acking each, and returns their bodies and
// x-stream-offset headers.
func readN(t testing.TB, ds <-chan amqp091.Delivery, n int) (bodies []string, offsets []int64) {
	t.Helper()
	for range n {
		select {
		case d, ok := <-ds:
			require.True(t, ok, "consumer closed after %d of %d", len(bodies), n)
			off, ok := d.Headers["x-stream-offset"].(int64)
			require.True(t, ok, "no x-stream-offset header in %v", d.Headers)
			bodies = append(bodies, string(d.Body))
			offsets = append(offsets, off)
			require.NoError(t, d.Ack(false))
		case <-time.After(amqptest.Timeout):
			require.FailNow(t, "no delivery", "got %d of %d: %v", len(bodies), n, bodies)
		}
	}
	return bodies, offsets
}

// requireNothing checks that no delivery is waiting: the broker answered
// a round trip on conn after everything before it.
func requireNothing(t testing.TB, ch *amqp091.Channel, ds <-chan amqp091.Delivery) {
	t.Helper()
	require.NoError(t, ch.Qos(100, 0, false)) // a round trip on the channel
	select {
	case d := <-ds:
		require.FailNow(t, "unexpected delivery", "%s", d.Body)
	default:
	}
}

func TestStreamOffsetSpecs(t *testing.T) {
	b, fake, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.ConfirmChannel(t, conn)
	all := []string{"m0", "m1", "m2", "m3", "m4"}
	// Each case gets its own stream: m0-m2 published at T, m3-m4 an hour
	// later, and the clock then stays at T+1h.
	tests := []struct {
		name   string
		offset func(T time.Time) any // nil: no x-stream-offset
		want   []string
	}{
		{"first", func(time.Time) any { return "first" }, all},
		{"last", func(time.Time) any { return "last" }, all[4:]},
		{"next", func(time.Time) any { return "next" }, nil},
		{"default is next", nil, nil},
		{"numeric", func(time.Time) any { return int64(2) }, all[2:]},
		{"numeric int32", func(time.Time) any { return int32(3) }, all[3:]},
		{"numeric past the end", func(time.Time) any { return int64(99) }, nil},
		{"timestamp before everything", func(T time.Time) any { return T.Add(-time.Minute) }, all},
		{"timestamp between batches", func(T time.Time) any { return T.Add(30 * time.Minute) }, all[3:]},
		{"timestamp after everything", func(T time.Time) any { return T.Add(2 * time.Hour) }, nil},
		{"interval 30m", func(time.Time) any { return "30m" }, all[3:]},
		{"interval 2h", func(time.Time) any { return "2h" }, all},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("s%d", i)
			declareStream(t, ch, name, nil)
			T := fake.Now()
			publishStream(t, pub, name, nil, all[:3]...)
			fake.Advance(time.Hour)
			publishStream(t, pub, name, nil, all[3:]...)
			var args amqp091.Table
			if tt.offset != nil {
				args = amqp091.Table{"x-stream-offset": tt.offset(T)}
			}
			rch, ds := streamReader(t, conn, name, 10, args)
			bodies, offsets := readN(t, ds, len(tt.want))
			require.Equal(t, tt.want, bodies)
			for i, off := range offsets {
				n, _ := strconv.Atoi(bodies[i][1:])
				require.Equal(t, int64(n), off, "x-stream-offset of %s", bodies[i])
			}
			requireNothing(t, rch, ds)
			// and a message published now reaches the consumer, whatever
			// its start
			publishStream(t, pub, name, nil, "m5")
			got, offs := readN(t, ds, 1)
			require.Equal(t, []string{"m5"}, got)
			require.Equal(t, []int64{5}, offs)
			require.NoError(t, rch.Close())
		})
	}
}
