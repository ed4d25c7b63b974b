package broker_test

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
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

// requireOnlyNew checks that nothing more waits for the consumer on rch
// and that a message published now reaches it, at offset next, whatever
// its start; then it closes rch.
func requireOnlyNew(t testing.TB, pub, rch *amqp091.Channel, ds <-chan amqp091.Delivery, name, body string, next int64) {
	t.Helper()
	requireNothing(t, rch, ds)
	publishStream(t, pub, name, nil, body)
	got, offs := readN(t, ds, 1)
	require.Equal(t, []string{body}, got)
	require.Equal(t, []int64{next}, offs)
	require.NoError(t, rch.Close())
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
			requireOnlyNew(t, pub, rch, ds, name, "m5", 5)
		})
	}
}

// TestStreamTimeOffsets: x-stream-offset as an interval or a timestamp on
// real time, as RabbitMQ reads them (rabbit_stream_queue:parse_offset_arg
// and osiris's timestamp search; checked against RabbitMQ 3.10.8): an
// interval of any unit and size starts that long before now, a timestamp
// (AMQP seconds, unsigned) before the first message starts at the first,
// one after the last at next. Huge values neither overflow nor wrap: a
// timestamp past 2262 or a negative one (2^64-60 on the wire) is in the
// future, 300 years back is before everything.
func TestStreamTimeOffsets(t *testing.T) {
	before := time.Now() // before anything is published
	tests := []struct {
		name   string
		offset any
		all    bool // every message, else only those published after
	}{
		{"interval 10s", "10s", true},
		{"interval 10m", "10m", true},
		{"interval 1h", "1h", true},
		{"interval 1D", "1D", true},
		{"interval 1M", "1M", true},
		{"interval 1Y", "1Y", true},
		{"interval 007s", "007s", true},
		{"interval 300Y, past int64 nanoseconds", "300Y", true},
		{"interval 20 digits", "99999999999999999999Y", true},
		{"timestamp one minute back", before.Add(-time.Minute), true},
		{"timestamp before the first message", time.Unix(1, 0), true},
		{"timestamp zero", time.Unix(0, 0), true},
		{"timestamp after the last message", before.Add(time.Hour), false},
		{"timestamp past 2262", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"timestamp in 9999", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), false},
		{"timestamp negative", time.Unix(-60, 0), false},
		{"timestamp max int64", time.Unix(math.MaxInt64, 0), false},
		{"timestamp min int64", time.Unix(math.MinInt64, 0), false},
	}
	bodies := amqptest.Numbered("m", 20)
	for backend, opts := range streamBackends() {
		t.Run(backend, func(t *testing.T) {
			b := startBroker(t, opts(t))
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			ch := amqptest.Channel(t, conn)
			pub := amqptest.ConfirmChannel(t, conn)
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					name := fmt.Sprintf("s%d", i)
					declareStream(t, ch, name, nil)
					amqptest.PublishConfirmed(t, amqptest.Channel(t, conn), name, false, bodies...)
					rch, ds := streamReader(t, conn, name, 50, amqp091.Table{"x-stream-offset": tt.offset})
					if tt.all {
						got, _ := readN(t, ds, len(bodies))
						require.Equal(t, bodies, got)
					}
					requireOnlyNew(t, pub, rch, ds, name, "later", 20)
				})
			}
		})
	}
}

// streamBackends are the stores a stream test runs on: the memory store,
// Pebble under DataDir, and Pebble on an in-memory file system given as
// the broker's own stores. None has a Clock: the broker runs on real time,
// as examples/server does.
func streamBackends() map[string]func(t *testing.T) broker.Options {
	return map[string]func(t *testing.T) broker.Options{
		"memory":           func(*testing.T) broker.Options { return broker.Options{} },
		"DataDir":          func(t *testing.T) broker.Options { return broker.Options{DataDir: t.TempDir()} },
		"pebble in memory": func(t *testing.T) broker.Options { return pebbleOptions(t, vfs.NewMem()) },
	}
}

func TestStreamRefusals(t *testing.T) {
	b, _, _ := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	declare := []struct {
		name                        string
		durable, exclusive, autoDel bool
		args                        amqp091.Table
		code                        int
		text                        string
	}{
		{"non-durable", false, false, false, nil, 406, "invalid property 'non-durable' for queue 'q' in vhost '/'"},
		{"exclusive", true, true, false, nil, 406, "invalid property 'exclusive-owner' for queue 'q' in vhost '/'"},
		{"auto-delete", true, false, true, nil, 406, "invalid property 'auto-delete' for queue 'q' in vhost '/'"},
		{"x-max-priority", true, false, false, amqp091.Table{"x-max-priority": int32(5)}, 406,
			"invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type rabbit_stream_queue"},
		{"x-message-ttl", true, false, false, amqp091.Table{"x-message-ttl": int32(5)}, 406,
			"invalid arg 'x-message-ttl' for queue 'q' in vhost '/' of queue type rabbit_stream_queue"},
		{"x-max-length", true, false, false, amqp091.Table{"x-max-length": int32(5)}, 406,
			"invalid arg 'x-max-length' for queue 'q' in vhost '/' of queue type rabbit_stream_queue"},
		{"x-max-age unit", true, false, false, amqp091.Table{"x-max-age": "7W"}, 406,
			"invalid arg 'x-max-age' for queue 'q' in vhost '/': invalid_max_age"},
		{"x-max-age zero", true, false, false, amqp091.Table{"x-max-age": "0D"}, 406,
			"invalid arg 'x-max-age' for queue 'q' in vhost '/': invalid_max_age"},
		{"x-max-age type", true, false, false, amqp091.Table{"x-max-age": int32(7)}, 406,
			"invalid arg 'x-max-age' for queue 'q' in vhost '/'"},
		{"x-max-length-bytes negative", true, false, false, amqp091.Table{"x-max-length-bytes": int64(-1)}, 406,
			"invalid arg 'x-max-length-bytes' for queue 'q' in vhost '/'"},
		{"segment size too large", true, false, false, amqp091.Table{"x-stream-max-segment-size-bytes": int64(3_000_000_001)}, 406,
			"Exceeded max value for x-stream-max-segment-size-bytes"},
	}
	for _, tt := range declare {
		t.Run("declare "+tt.name, func(t *testing.T) {
			ch := amqptest.Channel(t, conn)
			args := amqp091.Table{"x-queue-type": "stream"}
			for k, v := range tt.args {
				args[k] = v
			}
			_, err := ch.QueueDeclare("q", tt.durable, tt.autoDel, tt.exclusive, false, args)
			amqptest.RequireReply(t, err, tt.code, tt.text)
			require.False(t, queueExists(b, "q"))
		})
	}
	t.Run("declare with retention", func(t *testing.T) {
		ch := amqptest.Channel(t, conn)
		declareStream(t, ch, "ok", amqp091.Table{"x-max-age": "7D", "x-max-length-bytes": int64(1 << 30),
			"x-stream-max-segment-size-bytes": int32(1 << 20), "x-initial-cluster-size": int32(3)})
		_, err := ch.QueueDelete("ok", false, false, false)
		require.NoError(t, err)
	})

	ch := amqptest.Channel(t, conn)
	declareStream(t, ch, "s", nil)
	consume := []struct {
		name     string
		prefetch int
		global   bool
		noAck    bool
		args     amqp091.Table
		code     int
		text     string
	}{
		{"no prefetch", 0, false, false, nil, 406, "consumer prefetch count is not set for stream queue 's' in vhost '/'"},
		{"auto ack", 10, false, true, nil, 540, "automatic acknowledgement not supported by stream queue 's' in vhost '/'"},
		{"global qos", 10, true, false, nil, 540, "queue 's' in vhost '/' does not support global qos"},
		{"bad offset string", 10, false, false, amqp091.Table{"x-stream-offset": "yesterday"}, 406, "invalid arg 'x-stream-offset'"},
		{"bad offset type", 10, false, false, amqp091.Table{"x-stream-offset": true}, 406, "invalid arg 'x-stream-offset'"},
		{"negative offset", 10, false, false, amqp091.Table{"x-stream-offset": int64(-1)}, 406, "invalid arg 'x-stream-offset'"},
	}
	for _, tt := range consume {
		t.Run("consume "+tt.name, func(t *testing.T) {
			// 540 is a connection error: each case has its own.
			ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
			if tt.global {
				require.NoError(t, ch.Qos(tt.prefetch, 0, true))
				require.NoError(t, ch.Qos(tt.prefetch, 0, false))
			} else if tt.prefetch > 0 {
				require.NoError(t, ch.Qos(tt.prefetch, 0, false))
			}
			_, err := ch.Consume("s", "", tt.noAck, false, false, false, tt.args)
			amqptest.RequireReply(t, err, tt.code, tt.text)
		})
	}
	t.Run("basic.get", func(t *testing.T) {
		ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		_, _, err := ch.Get("s", false)
		amqptest.RequireReply(t, err, 540, "basic.get not supported by stream queues queue 's' in vhost '/'")
	})
	t.Run("queue.purge", func(t *testing.T) {
		ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		_, err := ch.QueuePurge("s", false)
		amqptest.RequireReply(t, err, 540, "queue.purge not supported by queue 's' in vhost '/'")
	})
	t.Run("redeclare", func(t *testing.T) {
		ch := amqptest.Channel(t, conn)
		declareStream(t, ch, "s", nil)
		_, err := ch.QueueDeclare("s", true, false, false, false, nil)
		amqptest.RequireReply(t, err, 406, "inequivalent arg 'x-queue-type'")
	})
	requireServes(t, conn)
}

// TestStreamManyConsumers: consumers at different offsets read the same
// log independently; acks are credit and delete nothing, so a late
// consumer from first still reads everything.
func TestStreamManyConsumers(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.ConfirmChannel(t, conn)
	declareStream(t, ch, "s", nil)
	bodies := amqptest.Numbered("m", 300)
	publishStream(t, pub, "s", nil, bodies[:200]...)
	starts := []int64{0, 50, 100, 199}
	var chans []<-chan amqp091.Delivery
	for i, start := range starts {
		_, ds := streamReader(t, conn, "s", 1+i*7, amqp091.Table{"x-stream-offset": start})
		chans = append(chans, ds)
	}
	publishStream(t, pub, "s", nil, bodies[200:]...)
	for i, ds := range chans {
		got, offs := readN(t, ds, 300-int(starts[i]))
		require.Equal(t, bodies[starts[i]:], got)
		require.Equal(t, starts[i], offs[0])
	}
	st := waitStats(t, b, "s", func(c queueCounts) bool { return c.Unacked == 0 })
	require.Equal(t, queueCounts{Ready: 300, Consumers: len(starts)}, st)
	_, ds := streamReader(t, conn, "s", 5, amqp091.Table{"x-stream-offset": "first"})
	got, _ := readN(t, ds, 300)
	require.Equal(t, bodies, got)
}

// TestStreamPrefetchIsCredit: a consumer gets no more than its prefetch
// until it acks; nack and reject give credit back as ack does, and
// nothing is redelivered.
func TestStreamPrefetchIsCredit(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.ConfirmChannel(t, conn)
	declareStream(t, ch, "s", nil)
	publishStream(t, pub, "s", nil, amqptest.Numbered("m", 10)...)
	rch, ds := streamReader(t, conn, "s", 3, amqp091.Table{"x-stream-offset": "first"})
	var held []amqp091.Delivery
	for range 3 {
		d, _ := amqptest.Receive(t, ds)
		held = append(held, d)
	}
	require.NoError(t, rch.Qos(3, 0, false)) // a round trip: nothing more came
	select {
	case d := <-ds:
		require.FailNow(t, "delivery past the prefetch", "%s", d.Body)
	default:
	}
	require.NoError(t, held[0].Nack(false, true))
	require.NoError(t, held[1].Reject(true))
	require.NoError(t, held[2].Ack(false))
	got, _ := readN(t, ds, 7)
	require.Equal(t, amqptest.Numbered("m", 10)[3:], got)
	requireNothing(t, rch, ds)
	require.Equal(t, uint64(10), queueStats(t, b, "s").Ready)
}

// TestStreamFiltering: x-stream-filter-value on publish, x-stream-filter
// and x-stream-match-unfiltered on consume (RabbitMQ 3.13+).
func TestStreamFiltering(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.ConfirmChannel(t, conn)
	declareStream(t, ch, "s", nil)
	for i := range 30 {
		var h amqp091.Table
		switch i % 3 {
		case 0:
			h = amqp091.Table{"x-stream-filter-value": "red"}
		case 1:
			h = amqp091.Table{"x-stream-filter-value": "blue"}
		}
		publishStream(t, pub, "s", h, fmt.Sprintf("%d", i))
	}
	pick := func(keep func(i int) bool) []string {
		var out []string
		for i := range 30 {
			if keep(i) {
				out = append(out, strconv.Itoa(i))
			}
		}
		return out
	}
	tests := []struct {
		name string
		args amqp091.Table
		want []string
	}{
		{"red", amqp091.Table{"x-stream-filter": "red"}, pick(func(i int) bool { return i%3 == 0 })},
		{"red and blue", amqp091.Table{"x-stream-filter": []any{"red", "blue"}}, pick(func(i int) bool { return i%3 != 2 })},
		{"blue and unfiltered", amqp091.Table{"x-stream-filter": "blue", "x-stream-match-unfiltered": true}, pick(func(i int) bool { return i%3 != 0 })},
		{"green", amqp091.Table{"x-stream-filter": "green"}, nil},
		{"no filter", nil, pick(func(int) bool { return true })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := amqp091.Table{"x-stream-offset": "first"}
			for k, v := range tt.args {
				args[k] = v
			}
			rch, ds := streamReader(t, conn, "s", 4, args)
			got, _ := readN(t, ds, len(tt.want))
			require.Equal(t, tt.want, got)
			requireNothing(t, rch, ds)
			require.NoError(t, rch.Close())
		})
	}
}

// body50 is a 50-byte body: with amqp091's 2 bytes of empty properties a
// record counts 52 bytes toward segments and retention.
func body50(i int) string { return fmt.Sprintf("%-50d", i) }

func bodies50(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, body50(i))
	}
	return out
}

// TestStreamRetentionBySize: segments of 100 bytes hold two messages;
// with x-max-length-bytes 300 whole segments go from the head until the
// stream holds at most 300 bytes, and the open segment always stays.
func TestStreamRetentionBySize(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.ConfirmChannel(t, conn)
	declareStream(t, ch, "s", amqp091.Table{"x-max-length-bytes": int64(300), "x-stream-max-segment-size-bytes": int64(100)})
	// A consumer from first holds m0 (prefetch 1) while retention removes
	// its segment and the next ones.
	rch, ds := streamReader(t, conn, "s", 1, amqp091.Table{"x-stream-offset": "first"})
	publishStream(t, pub, "s", nil, bodies50(0, 20)...)
	first, _ := amqptest.Receive(t, ds)
	require.Equal(t, body50(0), string(first.Body))
	// 20 records of 52 bytes in segments of two: the stream keeps the
	// last two segments (208 bytes; three would be 312).
	st := waitStats(t, b, "s", func(c queueCounts) bool { return c.Ready == 4 })
	require.Equal(t, uint64(4), st.Ready)
	require.NoError(t, first.Ack(false))
	// Behind retention, the consumer resumes at the new first offset.
	got, offs := readN(t, ds, 4)
	require.Equal(t, bodies50(16, 20), got)
	require.Equal(t, []int64{16, 17, 18, 19}, offs)
	requireNothing(t, rch, ds)
	_, ds2 := streamReader(t, conn, "s", 10, amqp091.Table{"x-stream-offset": int64(3)})
	got, _ = readN(t, ds2, 4)
	require.Equal(t, bodies50(16, 20), got)
}

// TestStreamRetentionByAge: x-max-age removes the closed segments whose
// newest message is older, on the broker's clock, never the open one.
func TestStreamRetentionByAge(t *testing.T) {
	b, fake, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.ConfirmChannel(t, conn)
	declareStream(t, ch, "s", amqp091.Table{"x-max-age": "1h", "x-stream-max-segment-size-bytes": int64(100)})
	publishStream(t, pub, "s", nil, bodies50(0, 4)...) // segments [0,1] and [2,3]
	fake.Advance(59 * time.Minute)
	require.Equal(t, uint64(4), queueStats(t, b, "s").Ready)
	fake.Advance(2 * time.Minute)
	// [0,1] is older than an hour and closed: gone; [2,3] is the last.
	waitStats(t, b, "s", func(c queueCounts) bool { return c.Ready == 2 })
	publishStream(t, pub, "s", nil, bodies50(4, 6)...)
	// now [2,3] is closed too, and over age
	waitStats(t, b, "s", func(c queueCounts) bool { return c.Ready == 2 })
	_, ds := streamReader(t, conn, "s", 10, amqp091.Table{"x-stream-offset": "first"})
	got, offs := readN(t, ds, 2)
	require.Equal(t, bodies50(4, 6), got)
	require.Equal(t, []int64{4, 5}, offs)
}

// TestStreamIntrospection: Stats, the management API and per-object
// metrics show a stream's type, size, first and last offsets and where
// each consumer reads; the direct Channel consumes it as a client does.
func TestStreamIntrospection(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.ConfirmChannel(t, conn)
	declareStream(t, ch, "s", amqp091.Table{"x-max-length-bytes": int64(300), "x-stream-max-segment-size-bytes": int64(100)})
	publishStream(t, pub, "s", nil, bodies50(0, 10)...)
	rch := amqptest.Channel(t, conn)
	require.NoError(t, rch.Qos(2, 0, false))
	ds, err := rch.Consume("s", "reader", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	require.NoError(t, err)
	got, _ := readN(t, ds, 3) // offsets 6, 7, 8; the ack of 8 gives credit for 9
	require.Equal(t, bodies50(6, 9), got)
	amqptest.Receive(t, ds) // 9, held

	// Acks reach the broker after the deliveries that follow them.
	st := waitStats(t, b, "s", func(c queueCounts) bool { return c.Unacked == 1 })
	require.Equal(t, uint64(4), st.Ready)
	var qs *broker.QueueStats
	for _, q := range b.Stats(context.Background()).QueueDetails {
		if q.Name == "s" {
			qs = &q
		}
	}
	require.NotNil(t, qs.Stream)
	require.Equal(t, broker.StreamStats{FirstOffset: 6, LastOffset: 9, NextOffset: 10, Messages: 4, Bytes: 4 * 52, Segments: 2,
		Consumers: []broker.StreamConsumerStats{{Tag: "reader", Connection: qs.Stream.Consumers[0].Connection, Channel: 2, Offset: 10}}}, *qs.Stream)

	peeked, err := b.PeekQueue(context.Background(), "/", "s", 2)
	require.NoError(t, err)
	require.Len(t, peeked, 2)
	require.Equal(t, body50(6), string(peeked[0].Publishing.Body))
	require.Equal(t, body50(7), string(peeked[1].Publishing.Body))

	api := amqptest.NewAPI(t, b.ManagementHandler())
	q := api.Get("/api/queues/%2F/s").(map[string]any)
	require.Equal(t, "stream", q["type"])
	require.Equal(t, float64(4), q["messages"])
	require.Equal(t, float64(1), q["messages_unacknowledged"])
	require.Equal(t, float64(6), q["first_offset"])
	require.Equal(t, float64(9), q["last_offset"])
	require.Equal(t, float64(9), q["committed_offset"])
	require.Equal(t, float64(2), q["segments"])
	require.Equal(t, float64(208), q["stream_bytes"])
	readers := q["stream_readers"].([]any)
	require.Len(t, readers, 1)
	require.Equal(t, "reader", readers[0].(map[string]any)["consumer_tag"])
	require.Equal(t, float64(10), readers[0].(map[string]any)["offset"])

	m := httptest.NewRecorder()
	b.MetricsHandler(broker.MetricsOptions{PerObject: true}).ServeHTTP(m, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{
		`warren_stream_first_offset{vhost="/",queue="s"} 6`,
		`warren_stream_last_offset{vhost="/",queue="s"} 9`,
		`warren_stream_bytes{vhost="/",queue="s"} 208`,
		`warren_stream_segments{vhost="/",queue="s"} 2`,
	} {
		require.Contains(t, m.Body.String(), line)
	}

	// The direct Channel: the same refusals and deliveries.
	dch, err := b.Channel(context.Background())
	require.NoError(t, err)
	defer dch.Close()
	_, err = dch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	amqptest.RequireReply(t, err, 406, "consumer prefetch count is not set for stream queue 's' in vhost '/'")
	dch, err = b.Channel(context.Background())
	require.NoError(t, err)
	defer dch.Close()
	require.NoError(t, dch.Qos(3, 0, false))
	dds, err := dch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": int64(7)})
	require.NoError(t, err)
	got, offs := readN(t, dds, 3)
	require.Equal(t, bodies50(7, 10), got)
	require.Equal(t, []int64{7, 8, 9}, offs)

	// Broker.Dial: amqp091-go over the in-memory pipe.
	_, pds := streamReader(t, amqptest.DialVia(t, b.Dial, "guest", "piped"), "s", 3, amqp091.Table{"x-stream-offset": "last"})
	got, offs = readN(t, pds, 1)
	require.Equal(t, bodies50(9, 10), got)
	require.Equal(t, []int64{9}, offs)
}

// TestStreamOffsetTracking: LavinMQ's server-side offset tracking. A
// consumer with its own tag and x-stream-offset null (or
// x-stream-automatic-offset-tracking true) resumes, under the same tag,
// after the last message it acked; unacked deliveries come again.
func TestStreamOffsetTracking(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.ConfirmChannel(t, conn)
	declareStream(t, ch, "s", nil)
	all := amqptest.Numbered("m", 20)
	publishStream(t, pub, "s", nil, all...)

	consume := func(tag string, args amqp091.Table) (*amqp091.Channel, <-chan amqp091.Delivery) {
		t.Helper()
		c := amqptest.Channel(t, conn)
		require.NoError(t, c.Qos(3, 0, false))
		ds, err := c.Consume("s", tag, false, false, false, false, args)
		require.NoError(t, err)
		return c, ds
	}
	null := amqp091.Table{"x-stream-offset": nil}
	// First time: null starts at first. Ack 7, hold 2 unacked, then go.
	c1, ds := consume("t1", null)
	got, _ := readN(t, ds, 7)
	require.Equal(t, all[:7], got)
	amqptest.Receive(t, ds)
	amqptest.Receive(t, ds)
	require.NoError(t, c1.Close())
	// The same tag resumes after the last ack: the unacked two come again.
	c1, ds = consume("t1", null)
	got, offs := readN(t, ds, 13)
	require.Equal(t, all[7:], got)
	require.Equal(t, int64(7), offs[0])
	requireNothing(t, c1, ds)
	require.NoError(t, c1.Close())
	c1, ds = consume("t1", null)
	requireNothing(t, c1, ds)
	require.NoError(t, c1.Close())

	// Automatic tracking with a start: "last" the first time only.
	auto := amqp091.Table{"x-stream-offset": "last", "x-stream-automatic-offset-tracking": true}
	c2, ds := consume("t2", auto)
	got, _ = readN(t, ds, 1)
	require.Equal(t, all[19:], got)
	require.NoError(t, c2.Close())
	publishStream(t, pub, "s", nil, "m-20", "m-21")
	c2, ds = consume("t2", auto)
	got, _ = readN(t, ds, 2)
	require.Equal(t, []string{"m-20", "m-21"}, got)
	require.NoError(t, c2.Close())

	// Another tag, or a plain x-stream-offset, is not tracked.
	c3, ds := consume("t3", amqp091.Table{"x-stream-offset": int64(18)})
	got, _ = readN(t, ds, 4)
	require.Equal(t, []string{"m-18", "m-19", "m-20", "m-21"}, got)
	require.NoError(t, c3.Close())
	c3, ds = consume("t3", amqp091.Table{"x-stream-offset": int64(18)})
	got, _ = readN(t, ds, 1)
	require.Equal(t, []string{"m-18"}, got)
	require.NoError(t, c3.Close())
	// A server-named consumer cannot come back: null is just first.
	c4, ds := consume("", null)
	got, _ = readN(t, ds, 1)
	require.Equal(t, []string{"m-0"}, got)
	require.NoError(t, c4.Close())
}

// TestStreamRedeclareAndDelete: a redeclaration must repeat a stream's
// own arguments (RabbitMQ 4.x compares a type's queue_arguments), and
// queue.delete ignores if-empty and if-unused on a stream, as RabbitMQ
// does; the delete-ok counts its messages.
func TestStreamRedeclareAndDelete(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	declareStream(t, ch, "s", amqp091.Table{"x-max-age": "1D"})
	declareStream(t, ch, "s", amqp091.Table{"x-max-age": "1D"})
	_, err := ch.QueueDeclare("s", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-max-age": "2D"})
	amqptest.RequireReply(t, err, 406, "inequivalent arg 'x-max-age' for queue 's' in vhost '/'")
	ch = amqptest.Channel(t, conn)
	publishStream(t, amqptest.ConfirmChannel(t, conn), "s", nil, "a", "b")
	streamReader(t, conn, "s", 1, nil)
	n, err := ch.QueueDelete("s", true, true, false)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.False(t, queueExists(b, "s"))
	// Declared again, it starts empty at offset 0, tracked offsets gone.
	declareStream(t, ch, "s", nil)
	publishStream(t, amqptest.ConfirmChannel(t, conn), "s", nil, "c")
	_, ds := streamReader(t, conn, "s", 1, amqp091.Table{"x-stream-offset": "first"})
	got, offs := readN(t, ds, 1)
	require.Equal(t, []string{"c"}, got)
	require.Equal(t, []int64{0}, offs)
}

// TestStreamOffsetTrackingAcksAfterCancel: acks that reach the stream
// after its consumer is gone (sent after basic.cancel) still move the
// tag's tracked offset.
func TestStreamOffsetTrackingAcksAfterCancel(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	declareStream(t, ch, "s", nil)
	publishStream(t, amqptest.ConfirmChannel(t, conn), "s", nil, amqptest.Numbered("m", 10)...)
	c := amqptest.Channel(t, conn)
	require.NoError(t, c.Qos(3, 0, false))
	ds, err := c.Consume("s", "t", false, false, false, false, amqp091.Table{"x-stream-offset": nil})
	require.NoError(t, err)
	var held []amqp091.Delivery
	for range 3 {
		d, _ := amqptest.Receive(t, ds)
		held = append(held, d)
	}
	require.NoError(t, c.Cancel("t", false))
	for _, d := range held {
		require.NoError(t, d.Ack(false))
	}
	waitStats(t, b, "s", func(q queueCounts) bool { return q.Unacked == 0 && q.Consumers == 0 })
	_, ds = streamReaderTagged(t, conn, "s", "t", amqp091.Table{"x-stream-offset": nil})
	got, _ := readN(t, ds, 1)
	require.Equal(t, []string{"m-3"}, got)
}

// streamReaderTagged is streamReader with a consumer tag of its own.
func streamReaderTagged(t testing.TB, conn *amqp091.Connection, name, tag string, args amqp091.Table) (*amqp091.Channel, <-chan amqp091.Delivery) {
	t.Helper()
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.Qos(10, 0, false))
	ds, err := ch.Consume(name, tag, false, false, false, false, args)
	require.NoError(t, err)
	return ch, ds
}
