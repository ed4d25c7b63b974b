package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/faultstore"
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

func TestParseMaxAge(t *testing.T) {
	day := 24 * time.Hour
	good := map[string]time.Duration{"7D": 7 * day, "1h": time.Hour, "30m": 30 * time.Minute, "10s": 10 * time.Second, "1Y": 365 * day, "2M": 60 * day}
	for s, want := range good {
		got, err := ParseMaxAge(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "D", "0D", "-1D", "+1D", "1W", "1.5h", "1 h", "h1", "99999999999D"} {
		_, err := ParseMaxAge(s)
		require.Error(t, err, s)
	}
}

func TestParseStreamConsume(t *testing.T) {
	ts := time.Unix(1700000000, 0)
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
		{"timestamp", amqp.Table{"x-stream-offset": ts}, StreamConsume{Kind: OffsetTime, Time: ts}},
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
	for _, arg := range streamRefusedArgs {
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
