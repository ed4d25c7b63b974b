package queue

import (
	"context"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/faultstore"
	"github.com/warrenmq/broker/storage"
)

// TestWithStreamOffset: the spliced header reads back as the decoded and
// re-encoded one does, for properties with and without headers and the
// fields before them.
func TestWithStreamOffset(t *testing.T) {
	cases := []amqp.Properties{
		{},
		{ContentType: "text/plain"},
		{ContentType: "a", ContentEncoding: "gzip", DeliveryMode: 2, MessageID: "id"},
		{Headers: amqp.Table{"k": "v", "n": int32(3)}},
		{ContentType: "x", Headers: amqp.Table{}, Priority: 4, Timestamp: time.Unix(1700000000, 0)},
		{Headers: amqp.Table{"x-stream-offset": int64(99)}}, // replaced, as RabbitMQ does
	}
	for i, p := range cases {
		raw := p.Append(nil)
		for _, off := range []uint64{0, 7, 1 << 40} {
			got, err := amqp.DecodeProperties(withStreamOffset(raw, off))
			require.NoError(t, err, "case %d", i)
			want, err := amqp.DecodeProperties(withStreamOffsetSlow(raw, off))
			require.NoError(t, err)
			require.Equal(t, want, got, "case %d", i)
			require.Equal(t, int64(off), got.Headers["x-stream-offset"])
		}
	}
}

func BenchmarkWithStreamOffset(b *testing.B) {
	p := amqp.Properties{ContentType: "application/json", DeliveryMode: 2, Headers: amqp.Table{"trace": "abc"}}
	raw := p.Append(nil)
	b.ReportAllocs()
	for i := range b.N {
		withStreamOffset(raw, uint64(i))
	}
}

// TestParseMaxAge: rabbit_amqqueue:check_max_age's ages, every unit, any
// number of digits (RabbitMQ 3.10.8 takes "300Y" and twenty digits), those
// past a Duration saturating instead of wrapping; the rest refused.
func TestParseMaxAge(t *testing.T) {
	day := 24 * time.Hour
	most := time.Duration(math.MaxInt64)
	good := []struct {
		in   string
		want time.Duration
	}{
		{"10s", 10 * time.Second}, {"30m", 30 * time.Minute}, {"1h", time.Hour}, {"7D", 7 * day},
		{"2M", 60 * day}, {"1Y", 365 * day}, {"007h", 7 * time.Hour},
		{"106751D", 106751 * day}, // the last whole day a Duration holds
		{"106752D", most}, {"292Y", 292 * 365 * day}, {"293Y", most}, {"300Y", most}, {"9223372036s", 9223372036 * time.Second},
		{"9223372037s", most}, {"18446744073709551615s", most}, {"99999999999999999999999999Y", most},
	}
	for _, tc := range good {
		got, err := ParseMaxAge(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	for _, s := range []string{"", "D", "s", "0D", "000s", "-1D", "+1D", "1W", "1d", "1H", "1.5h", "1 h", " 1h", "1h ",
		"h1", "1hh", "1e3s", "0x10s", "\uff11h", "１h", "99999999999999999999999999"} {
		_, err := ParseMaxAge(s)
		require.Error(t, err, s)
	}
}

// FuzzParseMaxAge: any string is refused or read as its digits times its
// unit, saturated at the longest Duration (checked against math/big), and
// a time offset, by interval or by timestamp, starts where unbounded
// arithmetic says, clamped to int64: never wrapped.
func FuzzParseMaxAge(f *testing.F) {
	for _, s := range []string{"1h", "7D", "300Y", "0s", "007m", "18446744073709551616Y", "first", "１h", "-1m"} {
		f.Add(s, uint64(1_700_000_000), int64(1_700_000_000_000_000_000))
	}
	f.Add("1Y", uint64(math.MaxUint64), int64(math.MinInt64))
	f.Add("1s", uint64(math.MaxInt64/1_000_000_000+1), int64(math.MaxInt64))
	units := map[byte]int64{'Y': 365 * 86400e9, 'M': 30 * 86400e9, 'D': 86400e9, 'h': 3600e9, 'm': 60e9, 's': 1e9}
	clamp := func(v *big.Int) int64 {
		if v.Cmp(big.NewInt(math.MaxInt64)) > 0 {
			return math.MaxInt64
		}
		if v.Cmp(big.NewInt(math.MinInt64)) < 0 {
			return math.MinInt64
		}
		return v.Int64()
	}
	f.Fuzz(func(t *testing.T, s string, ts uint64, now int64) {
		d, err := ParseMaxAge(s)
		n, valid := new(big.Int), len(s) >= 2 && strings.Trim(s[:len(s)-1], "0123456789") == ""
		var unit int64
		if valid {
			_, digits := n.SetString(s[:len(s)-1], 10)
			u, known := units[s[len(s)-1]]
			unit, valid = u, digits && known
		}
		if !valid || n.Sign() == 0 {
			require.Error(t, err, s)
		} else {
			require.NoError(t, err, s)
			require.Equal(t, clamp(n.Mul(n, big.NewInt(unit))), int64(d), s)
		}
		sc, err := ParseStreamConsume(amqp.Table{"x-stream-offset": s})
		if err == nil && sc.Kind == OffsetTime {
			require.Equal(t, d, sc.Ago)
			want := new(big.Int).Sub(big.NewInt(now), big.NewInt(int64(d)))
			require.Equal(t, clamp(want), sc.startTime(now), "%s at %d", s, now)
		}
		sc, err = ParseStreamConsume(amqp.Table{"x-stream-offset": time.Unix(int64(ts), 0)})
		require.NoError(t, err)
		require.Equal(t, StreamConsume{Kind: OffsetTime, Timestamp: ts}, sc)
		want := new(big.Int).Mul(new(big.Int).SetUint64(ts), big.NewInt(1e9))
		require.Equal(t, clamp(want), sc.startTime(now), "timestamp %d", ts)
	})
}

// TestStreamStartTime: where an x-stream-offset time starts, in Unix
// nanoseconds, for every interval unit and the timestamps at and past
// what int64 nanoseconds hold; nothing wraps.
func TestStreamStartTime(t *testing.T) {
	const now = int64(1_700_000_000_000_000_000)
	sec := int64(time.Second)
	tests := []struct {
		name string
		sc   StreamConsume
		now  int64
		want int64
	}{
		{"10s", StreamConsume{Ago: 10 * time.Second}, now, now - 10*sec},
		{"10m", StreamConsume{Ago: 10 * time.Minute}, now, now - 600*sec},
		{"1h", StreamConsume{Ago: time.Hour}, now, now - 3600*sec},
		{"1D", StreamConsume{Ago: 24 * time.Hour}, now, now - 86400*sec},
		{"1M", StreamConsume{Ago: 30 * 24 * time.Hour}, now, now - 30*86400*sec},
		{"1Y", StreamConsume{Ago: 365 * 24 * time.Hour}, now, now - 365*86400*sec},
		{"longest interval", StreamConsume{Ago: math.MaxInt64}, now, now - math.MaxInt64},
		{"longest interval at the earliest clock", StreamConsume{Ago: math.MaxInt64}, math.MinInt64 + 5, math.MinInt64},
		{"timestamp zero", StreamConsume{}, now, 0},
		{"timestamp one minute back", StreamConsume{Timestamp: uint64(now/sec - 60)}, now, now - 60*sec},
		{"last second int64 nanoseconds hold", StreamConsume{Timestamp: math.MaxInt64 / uint64(sec)}, now, math.MaxInt64 / sec * sec},
		{"past 2262", StreamConsume{Timestamp: math.MaxInt64/uint64(sec) + 1}, now, math.MaxInt64},
		{"max int64 seconds", StreamConsume{Timestamp: math.MaxInt64}, now, math.MaxInt64},
		{"negative on the wire", StreamConsume{Timestamp: uint64(1<<64 - 60)}, now, math.MaxInt64},
		{"max uint64 seconds", StreamConsume{Timestamp: math.MaxUint64}, now, math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.sc.Kind = OffsetTime
			require.Equal(t, tc.want, tc.sc.startTime(tc.now))
		})
	}
}

func TestParseStreamConsume(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	minute := -time.Minute
	good := []struct {
		name string
		in   amqp.Table
		want StreamConsume
	}{
		{"none", nil, StreamConsume{}},
		{"first", amqp.Table{"x-stream-offset": "first"}, StreamConsume{Kind: OffsetFirst}},
		{"last", amqp.Table{"x-stream-offset": "last"}, StreamConsume{Kind: OffsetLast}},
		{"next", amqp.Table{"x-stream-offset": "next"}, StreamConsume{Kind: OffsetNext}},
		{"offset", amqp.Table{"x-stream-offset": int16(5)}, StreamConsume{Kind: OffsetAt, Offset: 5}},
		{"timestamp", amqp.Table{"x-stream-offset": ts}, StreamConsume{Kind: OffsetTime, Timestamp: 1700000000}},
		{"timestamp with nanoseconds", amqp.Table{"x-stream-offset": ts.Add(999 * time.Millisecond)}, StreamConsume{Kind: OffsetTime, Timestamp: 1700000000}},
		// AMQP timestamps are unsigned: RabbitMQ reads a time before 1970
		// as amqp091-go sends it, 2^64-60.
		{"timestamp before 1970", amqp.Table{"x-stream-offset": time.Unix(0, 0).Add(minute)}, StreamConsume{Kind: OffsetTime, Timestamp: 1<<64 - 60}},
		{"timestamp max int64", amqp.Table{"x-stream-offset": time.Unix(math.MaxInt64, 0)}, StreamConsume{Kind: OffsetTime, Timestamp: math.MaxInt64}},
		{"interval past a Duration", amqp.Table{"x-stream-offset": "300Y"}, StreamConsume{Kind: OffsetTime, Ago: math.MaxInt64}},
		{"interval", amqp.Table{"x-stream-offset": "2h"}, StreamConsume{Kind: OffsetTime, Ago: 2 * time.Hour}},
		{"null tracks", amqp.Table{"x-stream-offset": nil}, StreamConsume{Kind: OffsetFirst, Track: true}},
		{"automatic tracking", amqp.Table{"x-stream-automatic-offset-tracking": true}, StreamConsume{Track: true}},
		{"automatic tracking string", amqp.Table{"x-stream-automatic-offset-tracking": "true"}, StreamConsume{Track: true}},
		{"filter", amqp.Table{"x-stream-filter": "a"}, StreamConsume{Filters: []string{"a"}}},
		{"filters", amqp.Table{"x-stream-filter": []any{"a", int32(1), "b"}, "x-stream-match-unfiltered": true},
			StreamConsume{Filters: []string{"a", "b"}, MatchUnfiltered: true}},
		{"match-unfiltered alone", amqp.Table{"x-stream-match-unfiltered": true}, StreamConsume{}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStreamConsume(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	for _, v := range []any{"soon", "0h", true, int64(-1), 1.5} {
		_, err := ParseStreamConsume(amqp.Table{"x-stream-offset": v})
		var ae *ArgError
		require.ErrorAs(t, err, &ae, "%v", v)
		require.Equal(t, "x-stream-offset", ae.Arg)
	}
}

func TestParseStreamArgs(t *testing.T) {
	got, err := ParseArgs(amqp.Table{"x-queue-type": "stream", "x-max-age": "7D", "x-max-length-bytes": int64(1000), "x-stream-max-segment-size-bytes": int32(100)})
	require.NoError(t, err)
	require.True(t, got.Stream)
	require.Equal(t, StreamArgs{MaxBytes: 1000, MaxAge: 7 * 24 * time.Hour, SegmentBytes: 100}, got.StreamArgs)
	require.Equal(t, int64(-1), got.MaxLengthBytes, "a stream's x-max-length-bytes is retention, not a classic limit")
	got, err = ParseArgs(amqp.Table{"x-queue-type": "stream"})
	require.NoError(t, err)
	require.Equal(t, StreamArgs{MaxBytes: -1, SegmentBytes: DefaultSegmentBytes}, got.StreamArgs)
	for _, arg := range []string{
		"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
		"x-max-length", "x-max-in-memory-length", "x-max-in-memory-bytes", "x-max-priority",
		"x-overflow", "x-queue-mode", "x-single-active-consumer", "x-queue-master-locator",
		"x-queue-version", "x-delivery-limit", "x-dead-letter-strategy",
		"x-quorum-initial-group-size", "x-quorum-target-group-size",
	} {
		_, err := ParseArgs(amqp.Table{"x-queue-type": "stream", arg: int32(1)})
		var ae *ArgError
		require.ErrorAs(t, err, &ae, arg)
		require.Equal(t, arg, ae.Arg)
		require.Equal(t, uint16(amqp.PreconditionFailed), ae.Code)
	}
}

// startStream starts a stream on s with the given extra arguments.
func startStream(t *testing.T, s Stores, c clock.Clock, extra amqp.Table) *Queue {
	t.Helper()
	args := amqp.Table{"x-queue-type": "stream"}
	for k, v := range extra {
		args[k] = v
	}
	a, err := ParseArgs(args)
	require.NoError(t, err)
	q, err := Start(context.Background(), Config{VHost: "/", Name: "q", Shard: "/q", Stores: s, Broker: "n1", Incarnation: 1, Clock: c, Features: Features{Args: a}})
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	return q
}

// TestStreamStoreFaults: a retention delete and a reader's Read that fail
// are redone at the retry; nothing is skipped or delivered twice.
func TestStreamStoreFaults(t *testing.T) {
	ctx := context.Background()
	wrapped, _, in := faulty()
	q := startStream(t, wrapped, nil, amqp.Table{"x-max-length-bytes": int64(300), "x-stream-max-segment-size-bytes": int64(100)})
	body := string(make([]byte, 98)) // 98 + 2 bytes of properties: a segment each
	del := in.Fail(faultstore.On(faultstore.DeleteByOffsets), 1, errors.New("disk gone"))
	publish(t, q, body, body, body, body, body)
	waitFired(t, del)
	// Retention keeps trying until the head segments are gone: 3 left.
	waitReady(t, q, 3)
	info, _, err := q.StreamInfo(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), info.FirstOffset)

	read := in.Fail(faultstore.On(faultstore.Read), 1, errors.New("disk gone"))
	s := newSink()
	credit := &Credit{}
	credit.SetLimit(10)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "r", Owner: owner, Credit: credit, Receiver: s, Stream: &StreamConsume{Kind: OffsetFirst}}))
	waitFired(t, read)
	for off := uint64(2); off < 5; off++ {
		m := s.next(t)
		require.Equal(t, off, m.Offset)
	}
	s.none(t)
}

// TestStreamTrackedOffsetSyncedOnCancel: the offsets a tracked consumer's
// acks move are saved without a sync, and the one saved when it is
// cancelled is synced, so a consumer that left resumes exactly after a
// crash.
func TestStreamTrackedOffsetSyncedOnCancel(t *testing.T) {
	ctx := context.Background()
	wrapped, _, in := faulty()
	q := startStream(t, wrapped, nil, nil)
	publish(t, q, "a", "b", "c")
	s := newSink()
	credit := &Credit{}
	credit.SetLimit(10)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "t", Owner: owner, Credit: credit, Receiver: s,
		Stream: &StreamConsume{Kind: OffsetFirst, Track: true}}))
	saves := func() (synced []bool) {
		for _, c := range in.Trace() {
			if c.Op == faultstore.Append && c.Shard == q.trackShard() {
				for _, r := range c.Records {
					if r.Exchange == "" { // not the config record
						synced = append(synced, r.Persistent)
					}
				}
			}
		}
		return synced
	}
	m := s.next(t)
	require.NoError(t, q.Settle(Ack, m.Ref))
	waitFor(t, "the ack step saves the offset", func() bool { return len(saves()) == 1 })
	require.Equal(t, []bool{false}, saves(), "a save per ack step is not synced")
	s.next(t)
	_, err := q.Cancel(ctx, owner, "t")
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, saves(), "the save at cancel is synced")
	off, _, ok, err := q.trackedOffset(ctx, "t")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(1), off)
}

// body100 is a body that fills a segment of 100 bytes on its own.
var body100 = string(make([]byte, 100))

// retained returns what the stream holds once retention ran at the
// clock's time (Idle dispatches, and dispatch applies retention).
func retained(t *testing.T, q *Queue) uint64 {
	t.Helper()
	ctx := context.Background()
	_, err := q.Idle(ctx)
	require.NoError(t, err)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	return st.Ready
}

// TestStreamAgeTimerNeverWraps: an x-max-age whose deadline is past what
// int64 nanoseconds hold arms no timer and removes nothing. Its sum
// wrapped: the deadline came out in the past and the actor posted itself
// a retention step, forever.
func TestStreamAgeTimerNeverWraps(t *testing.T) {
	for _, age := range []string{"292Y", "293Y", "99999999999999999999D"} {
		t.Run(age, func(t *testing.T) {
			ctx := context.Background()
			fake := clock.NewFake(time.Unix(1_700_000_000, 0))
			q := startStream(t, newStores(), fake, amqp.Table{"x-max-age": age, "x-stream-max-segment-size-bytes": int64(100)})
			publish(t, q, body100, body100, body100, body100)
			waitReady(t, q, 4)
			var ageAt int64
			var timer bool
			require.NoError(t, q.inspect(ctx, func(context.Context) {
				q.stream.armAge()
				ageAt, timer = q.stream.ageAt, q.stream.ageTimer != nil
			}))
			require.Zero(t, ageAt, "no deadline")
			require.False(t, timer)
			require.Zero(t, fake.Pending())
			fake.Advance(200 * 365 * 24 * time.Hour)
			require.Equal(t, uint64(4), retained(t, q))
		})
	}
}

// TestStreamSegmentAgeIsItsNewest: publishes are dated when their bytes
// arrived, so dates in offset order may step back; a segment is as young
// as its youngest message, not as its last one.
func TestStreamSegmentAgeIsItsNewest(t *testing.T) {
	T := time.Unix(1_700_000_000, 0)
	fake := clock.NewFake(T)
	q := startStream(t, newStores(), fake, amqp.Table{"x-max-age": "1h", "x-stream-max-segment-size-bytes": int64(100)})
	at := func(d time.Duration, body string) {
		require.NoError(t, q.Publish(storage.Record{Body: []byte(body), EnqueuedAt: T.Add(d).UnixNano()}, NoTTL, nil, 0))
	}
	at(0, "young")                                // segment [0, 1]: 5 + 95 bytes
	at(-10*time.Minute, string(make([]byte, 95))) // dated ten minutes earlier
	at(0, body100)                                // [2]
	at(0, body100)                                // [3], the open one
	waitReady(t, q, 4)
	fake.Advance(55 * time.Minute) // [0, 1]'s last message is 65 minutes old, its first 55
	require.Equal(t, uint64(4), retained(t, q))
	fake.Advance(6 * time.Minute)
	require.Equal(t, uint64(1), retained(t, q))
}

// TestStreamUndatedRecords: records an older Warren stored without a date
// (EnqueuedAt 0, when it had no Clock) count from when the stream started,
// for retention and time offsets, instead of from 1970: x-max-age removes
// them one age after that start, not at once.
func TestStreamUndatedRecords(t *testing.T) {
	ctx := context.Background()
	stores := newStores()
	recs := make([]storage.Record, 4)
	for i := range recs {
		recs[i] = storage.Record{Body: []byte(body100), Persistent: true}
	}
	_, err := stores.Shards.Append(ctx, "/q", recs)
	require.NoError(t, err)
	T := time.Unix(1_700_000_000, 0)
	fake := clock.NewFake(T)
	q := startStream(t, stores, fake, amqp.Table{"x-max-age": "1h", "x-stream-max-segment-size-bytes": int64(100)})
	require.Equal(t, uint64(4), retained(t, q))
	s := newSink()
	credit := &Credit{}
	credit.SetLimit(10)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "r", Owner: owner, Credit: credit, Receiver: s,
		Stream: &StreamConsume{Kind: OffsetTime, Timestamp: uint64(T.Unix() - 60)}}))
	for off := range uint64(4) {
		require.Equal(t, off, s.next(t).Offset)
	}
	fake.Advance(59 * time.Minute)
	require.Equal(t, uint64(4), retained(t, q))
	fake.Advance(2 * time.Minute)
	require.Equal(t, uint64(1), retained(t, q))
}
