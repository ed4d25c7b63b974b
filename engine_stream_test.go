package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestStreamMaxAgeKeepsYoungMessages: a stream with an age limit, by
// x-max-age or by a max-age policy, keeps every confirmed message younger
// than the age, however many segments they fill. Messages were dated only
// when the broker had a Clock, so on real time every closed segment looked
// 56 years old and went: of 200 messages in 20 segments, a consumer from
// first got the last 10.
func TestStreamMaxAgeKeepsYoungMessages(t *testing.T) {
	bodies := make([]string, 200)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("%-100s", fmt.Sprint("m", i))
	}
	for name, opts := range streamBackends() {
		t.Run(name, func(t *testing.T) {
			b := startBroker(t, opts(t))
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			ch := amqptest.Channel(t, conn)
			declareStream(t, ch, "by-arg", amqp091.Table{"x-max-age": "1h", "x-stream-max-segment-size-bytes": int64(1000)})
			declareStream(t, ch, "by-policy", amqp091.Table{"x-stream-max-segment-size-bytes": int64(1000)})
			require.NoError(t, b.Admin().PutPolicy(context.Background(), broker.Policy{Name: "age", Pattern: "^by-policy$",
				ApplyTo: "streams", Definition: map[string]any{"max-age": "1h"}}))
			for _, s := range []string{"by-arg", "by-policy"} {
				amqptest.PublishConfirmed(t, amqptest.Channel(t, conn), s, false, bodies...)
				info := streamStats(t, b, s)
				require.Equal(t, uint64(200), info.Messages, s)
				require.Equal(t, 20, info.Segments, "%s: segments of 1000 bytes hold ten 100-byte messages", s)
				_, ds := streamReader(t, conn, s, 50, amqp091.Table{"x-stream-offset": "first"})
				got, offs := readN(t, ds, len(bodies))
				require.Equal(t, bodies, got, s)
				for i, off := range offs {
					require.Equal(t, int64(i), off, s)
				}
			}
		})
	}
}

// TestStreamSurvivesRestart: a stream on Pebble keeps its messages (even
// transient ones: a stream stores every message), its offsets and its
// retention across a restart; offsets go on where they stopped.
func TestStreamSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b1 := startBroker(t, broker.Options{DataDir: dir})
	conn := amqptest.Dial(t, b1.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	declareStream(t, ch, "s", amqp091.Table{"x-max-length-bytes": int64(300), "x-stream-max-segment-size-bytes": int64(100)})
	pub := amqptest.ConfirmChannel(t, conn)
	publishStream(t, pub, "s", nil, bodies50(0, 10)...) // transient
	require.Equal(t, uint64(4), queueStats(t, b1, "s").Ready)
	// A tracked consumer (LavinMQ's x-stream-offset null) acks two and
	// goes; after the restart it resumes after them.
	kch := amqptest.Channel(t, conn)
	require.NoError(t, kch.Qos(2, 0, false))
	kds, err := kch.Consume("s", "keep", false, false, false, false, amqp091.Table{"x-stream-offset": nil})
	require.NoError(t, err)
	got, _ := readN(t, kds, 2)
	require.Equal(t, bodies50(6, 8), got)
	require.NoError(t, kch.Close())
	require.NoError(t, b1.Close())

	b2 := startBroker(t, broker.Options{DataDir: dir})
	conn2 := amqptest.Dial(t, b2.URL(), amqp091.Config{})
	require.Equal(t, uint64(4), queueStats(t, b2, "s").Ready)
	_, ds := streamReader(t, conn2, "s", 10, amqp091.Table{"x-stream-offset": "first"})
	got, offs := readN(t, ds, 4)
	require.Equal(t, bodies50(6, 10), got)
	require.Equal(t, []int64{6, 7, 8, 9}, offs)
	kch = amqptest.Channel(t, conn2)
	require.NoError(t, kch.Qos(2, 0, false))
	kds, err = kch.Consume("s", "keep", false, false, false, false, amqp091.Table{"x-stream-offset": nil})
	require.NoError(t, err)
	got, _ = readN(t, kds, 2)
	require.Equal(t, bodies50(8, 10), got)
	require.NoError(t, kch.Close())
	// The segments were rebuilt where they were: two more messages close
	// a segment and the oldest one goes.
	pub2 := amqptest.ConfirmChannel(t, conn2)
	publishStream(t, pub2, "s", nil, bodies50(10, 12)...)
	got, offs = readN(t, ds, 2)
	require.Equal(t, bodies50(10, 12), got)
	require.Equal(t, []int64{10, 11}, offs)
	waitStats(t, b2, "s", func(c queueCounts) bool { return c.Ready == 4 })
	_, ds2 := streamReader(t, conn2, "s", 10, amqp091.Table{"x-stream-offset": "first"})
	got, _ = readN(t, ds2, 4)
	require.Equal(t, bodies50(8, 12), got)
}

// TestStreamKill9KeepsConfirmed: SIGKILL mid-publish; after the restart the
// stream holds every confirmed message, once, at consecutive offsets in
// publish order.
func TestStreamKill9KeepsConfirmed(t *testing.T) {
	srv, restart := killableServer(t)
	conn, err := amqp091.Dial(srv.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	declareStream(t, ch, "s", nil)
	require.NoError(t, ch.Confirm(false))
	const n = 3000
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			// transient: a stream keeps it all the same
			if ch.PublishWithContext(context.Background(), "", "s", false, false,
				amqp091.Publishing{Body: []byte(fmt.Sprintf("m-%d", i))}) != nil {
				return
			}
		}
	}()
	confirmed := 0
	killed := false
	for c := range confirms {
		if c.Ack {
			confirmed = max(confirmed, int(c.DeliveryTag))
		}
		if !killed && confirmed >= n/3 {
			srv.Kill(t)
			killed = true
		}
	}
	wg.Wait()
	require.True(t, killed)

	srv2 := restart()
	conn2, err := amqp091.Dial(srv2.URL())
	require.NoError(t, err)
	defer conn2.Close()
	q, err := amqptest.Channel(t, conn2).QueueDeclarePassive("s", true, false, false, false, streamArgs)
	require.NoError(t, err)
	require.GreaterOrEqual(t, q.Messages, confirmed)
	_, ds := streamReader(t, conn2, "s", 500, amqp091.Table{"x-stream-offset": "first"})
	got, offs := readN(t, ds, q.Messages)
	for i := range got {
		require.Equal(t, fmt.Sprintf("m-%d", i), got[i])
		require.Equal(t, int64(i), offs[i])
	}
}
