package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

func TestHistogramQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []int64
	}{
		{"exact small values", []int64{0, 1, 2, 3, 50, 100, 127}},
		{"microseconds", seqValues(1000, 1000)},
		{"milliseconds", seqValues(2000, 1_000_000)},
		{"skewed", append(seqValues(990, 10_000), seqValues(10, 50_000_000)...)},
		{"huge", []int64{math.MaxInt64 / 2, math.MaxInt64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h histogram
			for _, v := range tc.values {
				h.record(v)
			}
			sorted := slices.Clone(tc.values)
			slices.Sort(sorted)
			for _, q := range []float64{0.5, 0.95, 0.99, 1} {
				rank := int(math.Ceil(q * float64(len(sorted))))
				want := float64(sorted[rank-1])
				got := float64(h.quantile(q))
				require.InDelta(t, want, got, want/64+1, "q=%v", q)
			}
			require.Equal(t, sorted[len(sorted)-1], h.max)
		})
	}
}

func seqValues(n int, step int64) []int64 {
	vs := make([]int64, n)
	for i := range vs {
		vs[i] = int64(i+1) * step
	}
	return vs
}

func TestHistogramBucketsCoverInt64(t *testing.T) {
	for _, v := range []int64{0, 127, 128, 129, 1 << 20, 1<<20 + 12345, math.MaxInt64} {
		i := histIndex(v)
		require.Less(t, i, histBuckets, "v=%d", v)
		mid := histValue(i)
		require.InDelta(t, float64(v), float64(mid), float64(v)/64+1, "v=%d", v)
	}
	var h histogram
	require.Zero(t, h.quantile(0.99), "empty")
	h.record(-5) // corrupt body: counted as zero, never a panic
	require.Zero(t, h.quantile(1))
	var m histogram
	m.record(1000)
	m.merge(&h)
	require.EqualValues(t, 2, m.n)
	require.EqualValues(t, 1000, m.max)
}

func TestTracker(t *testing.T) {
	for _, tc := range []struct {
		name                                 string
		seqs                                 []uint32
		bound, expected                      uint64
		distinct, dups, reordered, malformed uint64
		missing                              uint64
	}{
		{name: "in order", seqs: []uint32{0, 1, 2, 3}, bound: 4, expected: 4, distinct: 4},
		{name: "one lost", seqs: []uint32{0, 1, 3}, bound: 4, expected: 4, distinct: 3, missing: 1},
		{name: "duplicate", seqs: []uint32{0, 1, 1, 2}, bound: 3, expected: 3, distinct: 3, dups: 1},
		{name: "reordered", seqs: []uint32{1, 0, 2}, bound: 3, expected: 3, distinct: 3, reordered: 1},
		{name: "beyond the publisher", seqs: []uint32{0, 1 << 31}, bound: 1, expected: 1, distinct: 1, malformed: 1},
		{name: "across words", seqs: seqRange(0, 200), bound: 200, expected: 200, distinct: 200},
		{name: "tail lost", seqs: seqRange(0, 130), bound: 200, expected: 200, distinct: 130, missing: 70},
		{name: "nothing seen", bound: 70, expected: 70, missing: 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr tracker
			for _, s := range tc.seqs {
				tr.see(s, tc.bound)
			}
			require.Equal(t, tc.distinct, tr.distinct)
			require.Equal(t, tc.dups, tr.dups)
			require.Equal(t, tc.reordered, tr.reordered)
			require.Equal(t, tc.malformed, tr.malformed)
			require.Equal(t, tc.missing, tr.missing(tc.expected))
		})
	}
}

// TestLostConfirmed checks notSeenOf, the count of confirmed numbers a
// consumer never saw: the loss a run must report apart from unconfirmed
// messages whose outcome a 541 left unknown.
func TestLostConfirmed(t *testing.T) {
	for _, tc := range []struct {
		name            string
		confirmed, seen []uint32
		lost            uint64
	}{
		{name: "all seen", confirmed: seqRange(0, 100), seen: seqRange(0, 100)},
		{name: "unconfirmed unseen", confirmed: seqRange(0, 100), seen: seqRange(0, 100), lost: 0},
		{name: "one confirmed lost", confirmed: seqRange(0, 100), seen: append(seqRange(0, 41), seqRange(42, 100)...), lost: 1},
		{name: "seen fewer words", confirmed: seqRange(0, 300), seen: seqRange(0, 10), lost: 290},
		{name: "seen more than confirmed", confirmed: seqRange(0, 10), seen: seqRange(0, 300)},
		{name: "nothing confirmed", seen: seqRange(0, 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conf, seen tracker
			for _, s := range tc.confirmed {
				conf.see(s, 1<<20)
			}
			for _, s := range tc.seen {
				seen.see(s, 1<<20)
			}
			require.Equal(t, tc.lost, seen.notSeenOf(&conf))
		})
	}
}

func seqRange(from, to uint32) []uint32 {
	var s []uint32
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func TestHeaderRoundTrip(t *testing.T) {
	body := make([]byte, 20)
	putHeader(body, 42, 123456789)
	seq, sent, ok := parseHeader(body)
	require.True(t, ok)
	require.EqualValues(t, 42, seq)
	require.EqualValues(t, 123456789, sent)
	_, _, ok = parseHeader(body[:11])
	require.False(t, ok)
}

func TestWindow(t *testing.T) {
	w := newWindow(2)
	require.True(t, w.acquire(1))
	require.True(t, w.acquire(1))
	granted := make(chan bool)
	go func() { granted <- w.acquire(1) }()
	w.release(1) // the blocked acquire can only finish after this
	require.True(t, <-granted)

	// An empty window grants more than its limit rather than deadlock.
	big := newWindow(2)
	require.True(t, big.acquire(8))
	big.release(100) // never negative
	require.True(t, big.acquire(2))

	go func() { granted <- w.acquire(1) }()
	w.close()
	require.False(t, <-granted)
	require.False(t, w.acquire(1))
}

func TestParseStatCPU(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 1"
	for _, tc := range []struct {
		name string
		raw  string
		want time.Duration
		err  bool
	}{
		{name: "plain", raw: "123 (beam.smp)" + tail, want: 4 * time.Second},
		{name: "parentheses in the name", raw: "123 (a) (b c)" + tail, want: 4 * time.Second},
		{name: "no name", raw: "123 beam" + tail, err: true},
		{name: "short", raw: "123 (x) S 1 2", err: true},
		{name: "not a number", raw: "123 (x) S 1 2 3 4 5 6 7 8 9 10 x 1 0", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.raw))
			if tc.err {
				require.Error(t, err)
				require.True(t, strings.HasPrefix(err.Error(), "perftest: "), err.Error())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	own, err := procCPU(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, own, time.Duration(0))
	_, err = procCPU(-1)
	require.Error(t, err)
}

func TestParseStatus(t *testing.T) {
	rss, hwm, err := parseStatus(strings.NewReader("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"))
	require.NoError(t, err)
	require.EqualValues(t, 1<<20, rss)
	require.EqualValues(t, 2<<20, hwm)
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\nVmHWM:\t1 kB\n", "VmRSS:\tx kB\nVmHWM:\t1 kB\n"} {
		_, _, err := parseStatus(strings.NewReader(bad))
		require.Error(t, err, bad)
	}
	rss, hwm, err = memStatus(0)
	require.NoError(t, err)
	require.Positive(t, rss)
	require.GreaterOrEqual(t, hwm, rss/2)
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		inprocess string
		err       string
	}{
		{args: nil},
		{args: []string{"-inprocess"}, inprocess: "dial"},
		{args: []string{"-inprocess=dial"}, inprocess: "dial"},
		{args: []string{"-inprocess=direct"}, inprocess: "direct"},
		{args: []string{"-inprocess=false"}},
		{args: []string{"-inprocess=tcp"}, inprocess: "tcp"},
		{args: []string{"-inprocess=udp"}, err: "want dial, tcp or direct"},
		{args: []string{"-size", "11"}, err: "at least 12"},
		{args: []string{"-size", "1099511627776"}, err: "at most 134217728"},
		{args: []string{"-scenario", "nope"}, err: "unknown scenario"},
		{args: []string{"-duration", "0s"}, err: "-duration"},
		{args: []string{"-rate", "-1", "-inflight", "0"}, err: "-rate must not be negative\nperftest: -inflight must be positive"},
		{args: []string{"-prefetch", "70000"}, err: "16 bits"},
		{args: []string{"-inprocess", "-broker-pid", "1"}, err: "-broker-pid is for -url"},
		{args: []string{"extra"}, err: "unexpected arguments"},
		{args: []string{"-client", "raw"}},
		{args: []string{"-client", "raw", "-inprocess=tcp"}, inprocess: "tcp"},
		{args: []string{"-client", "raw", "-inprocess"}, err: "-client raw needs a TCP broker"},
		{args: []string{"-client", "raw", "-scenario", "persistent-confirm"}, err: "transient and fanout scenarios"},
		{args: []string{"-client", "pika"}, err: "want amqp091 or raw"},
		{args: []string{"-url", "amqp://a/,amqp://b/"}},
		{args: []string{"-broker-pid", "1,2,3"}},
		{args: []string{"-broker-pid", "1,x"}, err: "comma-separated pids"},
		{args: []string{"-broker-pid", "1,-2"}, err: "-broker-pid must not be negative"},
		{args: []string{"-url", "amqp://a/,amqp://b/", "-inprocess"}, err: "several -url"},
		{args: []string{"-url", "amqp://a/,amqp://b/", "-client", "raw"}, err: "several -url"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cfg, err := parseFlags(tc.args, &bytes.Buffer{})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.inprocess, cfg.inprocess)
		})
	}
}

func TestDirectMode(t *testing.T) {
	for _, scenario := range []string{"transient", "persistent-confirm", "fanout", "get", "many-queues"} {
		t.Run(scenario, func(t *testing.T) {
			res, err := runJSON(t, "-inprocess=direct", "-data", t.TempDir(), "-scenario", scenario,
				"-duration", "100ms", "-count", "300", "-connections", "3", "-queues", "3", "-confirm-window", "16")
			require.NoError(t, err)
			require.True(t, res.Verified, "%+v", res)
			require.Contains(t, res.Target, "direct API")
			require.Positive(t, res.Consumed)
		})
	}
}

// runJSON runs perftest with -json and decodes its one line of output.
func runJSON(t *testing.T, args ...string) (*result, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"-json", "-drain-timeout", "20s", "-dup-grace", "10ms"}, args...), &out, &bytes.Buffer{})
	if out.Len() == 0 {
		return nil, err
	}
	res := new(result)
	require.NoError(t, json.Unmarshal(out.Bytes(), res), out.String())
	return res, err
}

func TestScenariosInProcess(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		args     []string
	}{
		{"transient", []string{"-size", "1024"}},
		{"persistent-confirm", []string{"-confirm-window", "16", "-prefetch", "10"}},
		{"persistent-confirm", []string{"-queues", "3", "-queue-type", "quorum", "-confirm-window", "16", "-prefetch", "10"}},
		{"latency", []string{"-rate", "500"}},
		{"fanout", []string{"-queues", "3", "-inflight", "50"}},
		{"get", []string{"-count", "300"}},
		{"many-queues", []string{"-connections", "3", "-rate", "200"}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			args := append([]string{"-inprocess", "-data", t.TempDir(), "-scenario", tc.scenario, "-duration", "100ms", "-label", "warren"}, tc.args...)
			res, err := runJSON(t, args...)
			require.NoError(t, err)
			require.True(t, res.Verified, "%+v", res)
			require.Equal(t, tc.scenario, res.Scenario)
			require.Positive(t, res.Published)
			require.Zero(t, res.Lost+res.Duplicates+res.Malformed+res.Nacked)
			require.Positive(t, res.ConsumedPerS)
			require.NotNil(t, res.BrokerCPUS)
			require.NotNil(t, res.RSSPeakMiB)
			require.Equal(t, "warren", res.Label)
			switch tc.scenario {
			case "fanout":
				require.Equal(t, 3*res.Published, res.Consumed)
			case "get":
				require.EqualValues(t, 300, res.Consumed)
			case "persistent-confirm":
				require.Equal(t, res.Published, res.Confirmed)
				require.Equal(t, res.Published, res.Consumed)
				if slices.Contains(tc.args, "-queues") {
					require.EqualValues(t, 3, res.Queues, "a queue per publisher")
				}
			default:
				require.Equal(t, res.Published, res.Consumed)
			}
		})
	}
}

func TestRawClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want func(*result) uint64
	}{
		{"transient 12 B", []string{"-scenario", "transient"}, func(r *result) uint64 { return r.Published }},
		// Bodies over the frame max: several body frames a message.
		{"transient 300 KiB", []string{"-scenario", "transient", "-size", "307200", "-inflight", "600"}, func(r *result) uint64 { return r.Published }},
		{"fanout", []string{"-scenario", "fanout", "-queues", "3"}, func(r *result) uint64 { return 3 * r.Published }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-inprocess=tcp", "-memory", "-client", "raw", "-duration", "100ms"}, tc.args...)
			res, err := runJSON(t, args...)
			require.NoError(t, err)
			require.True(t, res.Verified, "%+v", res)
			require.Equal(t, "raw", res.Client)
			require.Positive(t, res.Published)
			require.Zero(t, res.Published%rawBatch, "whole batches")
			require.Equal(t, tc.want(res), res.Consumed)
			require.NotNil(t, res.ClientCPUUSPerMsg)
		})
	}
}

// TestRawClientAgainstURL runs the raw client against a listener given by
// -url, and fails a run whose publishes the broker refuses.
func TestRawClientAgainstURL(t *testing.T) {
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	res, err := runJSON(t, "-url", b.URL(), "-broker-pid", strconv.Itoa(os.Getpid()), "-client", "raw", "-duration", "100ms")
	require.NoError(t, err)
	require.True(t, res.Verified, "%+v", res)
	require.NotNil(t, res.BrokerCPUUSPerMsg)

	// A publisher whose exchange is gone gets channel.close 404: the run
	// reports it instead of waiting for deliveries that never come.
	cfg, err := parseFlags([]string{"-url", b.URL(), "-client", "raw", "-scenario", "fanout", "-queues", "1", "-duration", "200ms", "-drain-timeout", "1s"}, &bytes.Buffer{})
	require.NoError(t, err)
	tgt, err := openTarget(cfg)
	require.NoError(t, err)
	r := &rawState{runState: &runState{cfg: cfg, tgt: tgt, base: time.Now(), id: runID()}}
	r.spec, err = specFor(cfg)
	require.NoError(t, err)
	require.NoError(t, r.setupRaw())
	require.NoError(t, r.admin.ExchangeDelete(r.flows[0].exchange, false, false))
	published := make(chan struct{})
	go func() {
		defer close(published)
		r.publishRaw(context.Background(), r.flows[0], r.pubs[0], time.Now().Add(time.Minute))
	}()
	// Closing the window ends the publisher, which nothing consumes for.
	t.Cleanup(func() { r.closeRaw(); <-published })
	require.Eventually(t, func() bool {
		r.errMu.Lock()
		defer r.errMu.Unlock()
		return len(r.errs) > 0
	}, 5*time.Second, 10*time.Millisecond)
	r.errMu.Lock()
	defer r.errMu.Unlock()
	require.Contains(t, r.errs[0], "404")
}

func TestTextOutputAndProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.out")
	heap := filepath.Join(t.TempDir(), "heap.out")
	var out bytes.Buffer
	err := run(context.Background(), []string{"-inprocess=tcp", "-memory", "-duration", "50ms", "-cpuprofile", prof, "-memprofile", heap}, &out, &bytes.Buffer{})
	require.NoError(t, err)
	require.Contains(t, out.String(), "verified   yes")
	require.Contains(t, out.String(), "broker and client together")
	require.Contains(t, out.String(), "over TCP 127.0.0.1:")
	for _, p := range []string{prof, heap} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Positive(t, st.Size(), p)
	}
}

// TestAgainstURL measures a broker behind a TCP URL, with its pid given (it
// is this process), as compare.sh does with RabbitMQ and examples/server.
func TestAgainstURL(t *testing.T) {
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	res, err := runJSON(t, "-url", b.URL(), "-broker-pid", strconv.Itoa(os.Getpid()), "-duration", "100ms")
	require.NoError(t, err)
	require.True(t, res.Verified)
	require.Contains(t, res.CPUSource, "/proc/")
	require.NotContains(t, res.Target, "guest:guest", "the password is redacted")
	require.NotNil(t, res.RSSHWMMiB)

	res, err = runJSON(t, "-url", b.URL(), "-duration", "50ms")
	require.NoError(t, err)
	require.Nil(t, res.BrokerCPUS, "no pid, no broker CPU")

	pid := strconv.Itoa(os.Getpid())
	res, err = runJSON(t, "-url", b.URL(), "-broker-pid", pid+","+pid, "-duration", "50ms")
	require.NoError(t, err)
	require.Contains(t, res.CPUSource, "/proc/{"+pid+","+pid+"}/", "several pids: their CPU adds up")

	_, err = runJSON(t, "-url", "http://x/")
	require.ErrorContains(t, err, "not an amqp:// or amqps:// URL")
	_, err = runJSON(t, "-url", b.URL()+",http://x/")
	require.ErrorContains(t, err, "not an amqp:// or amqps:// URL")
}

// TestSeveralURLs runs against two brokers: queue i, its publisher and
// its consumer go to URL i mod 2, so each broker gets half the queues.
func TestSeveralURLs(t *testing.T) {
	var brokers []*broker.Broker
	var urls []string
	for range 2 {
		b, err := broker.New(broker.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		_, err = b.Listen("127.0.0.1:0")
		require.NoError(t, err)
		brokers = append(brokers, b)
		urls = append(urls, b.URL())
	}
	res, err := runJSON(t, "-url", strings.Join(urls, ","), "-scenario", "persistent-confirm", "-queues", "4", "-duration", "100ms", "-keep")
	require.NoError(t, err)
	require.True(t, res.Verified)
	require.Equal(t, 4, res.Queues)
	require.Zero(t, res.LostConfirmed)
	for i, b := range brokers {
		st := b.Stats(context.Background())
		var names []string
		for _, q := range st.QueueDetails {
			names = append(names, q.Name)
		}
		require.Len(t, names, 2, "broker %d holds half the queues: %v", i, names)
		for _, n := range names {
			flow, _ := strconv.Atoi(n[strings.LastIndex(n[:len(n)-2], "-")+1 : len(n)-2])
			require.Equal(t, i, flow%2, "queue %s on broker %d", n, i)
		}
		require.Greater(t, st.Totals.Published, uint64(0), "broker %d got publishes", i)
	}
}

// faultyConn wraps a connection so its consumers see a lost or a repeated
// delivery, which the run must refuse to call verified.
type faultyConn struct {
	conn
	fault string
}

type faultyChannel struct {
	channel
	fault     string
	published *int
}

func (c faultyConn) Channel() (channel, error) {
	ch, err := c.conn.Channel()
	if err != nil {
		return nil, err
	}
	return faultyChannel{ch, c.fault, new(int)}, nil
}

// PublishWithContext closes the channel at the 100th publish under the
// fault "close-publisher", as a broker closing it with 541 would: what was
// not confirmed by then never will be.
func (c faultyChannel) PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	if *c.published++; c.fault == "close-publisher" && *c.published == 100 {
		c.channel.Close()
	}
	return c.channel.PublishWithContext(ctx, exchange, key, mandatory, immediate, msg)
}

func (c faultyChannel) Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error) {
	in, err := c.channel.Consume(queue, consumer, autoAck, exclusive, noLocal, noWait, args)
	if err != nil {
		return nil, err
	}
	out := make(chan amqp091.Delivery)
	go func() {
		defer close(out)
		n := 0
		for d := range in {
			n++
			switch {
			case c.fault == "lose" && n == 3:
				continue
			case c.fault == "duplicate" && n == 3:
				out <- d
			}
			out <- d
		}
	}()
	return out, nil
}

// faultyRun runs a streaming scenario in process with args, every
// connection under fault (faultyConn).
func faultyRun(t *testing.T, fault string, args ...string) *result {
	t.Helper()
	cfg, err := parseFlags(append([]string{"-inprocess", "-memory"}, args...), &bytes.Buffer{})
	require.NoError(t, err)
	tgt, err := openTarget(cfg)
	require.NoError(t, err)
	defer tgt.close()
	dial := tgt.dial
	tgt.dial = func(name string) (conn, error) {
		c, err := dial(name)
		if err != nil {
			return nil, err
		}
		return faultyConn{c, fault}, nil
	}
	res, err := runStreams(context.Background(), cfg, tgt)
	require.NoError(t, err)
	return res
}

// TestClosedPublisher checks a run whose publisher's channel closes
// mid-run: it ends without waiting for the unconfirmed messages (whose
// outcome is unknown), reports no confirmed message lost, and is not
// verified.
func TestClosedPublisher(t *testing.T) {
	res := faultyRun(t, "close-publisher", "-scenario", "persistent-confirm", "-duration", "300ms", "-drain-timeout", "3s", "-dup-grace", "10ms")
	require.False(t, res.Verified)
	require.Less(t, res.Confirmed, uint64(100))
	require.Zero(t, res.LostConfirmed)
	for _, e := range res.Errors {
		require.NotContains(t, e, "without progress", "no wait for what was never confirmed")
	}
}

func TestUnverifiedRunsFail(t *testing.T) {
	for _, fault := range []string{"lose", "duplicate"} {
		t.Run(fault, func(t *testing.T) {
			res := faultyRun(t, fault, "-duration", "50ms", "-drain-timeout", "2s", "-dup-grace", "50ms")
			require.False(t, res.Verified)
			var text bytes.Buffer
			res.writeText(&text)
			if fault == "lose" {
				require.EqualValues(t, 1, res.Lost)
				require.Contains(t, text.String(), "1 lost")
				require.Contains(t, text.String(), "without progress")
			} else {
				require.EqualValues(t, 1, res.Duplicates)
				require.Contains(t, text.String(), "1 duplicated")
			}
		})
	}
}

func TestTable(t *testing.T) {
	cpu := func(v float64) *float64 { return &v }
	lines := []result{
		{Label: "warren", Scenario: "idle", RSSStartMiB: cpu(12), Verified: true},
		{Label: "rabbitmq", Scenario: "idle", RSSStartMiB: cpu(140), Verified: true},
		{Label: "rabbitmq", Scenario: "transient", Size: 12, ConsumedPerS: 50000, BrokerCPUUSPerMsg: cpu(21.9), Verified: true},
		{Label: "warren", Scenario: "transient", Size: 12, ConsumedPerS: 90000, BrokerCPUUSPerMsg: cpu(5), Verified: true},
		{Label: "warren", Scenario: "transient", Size: 12, ConsumedPerS: 120000, BrokerCPUUSPerMsg: cpu(4), Verified: true},
		{Label: "warren", Scenario: "transient", Size: 12, ConsumedPerS: 110000, BrokerCPUUSPerMsg: cpu(6), Verified: false},
		{Label: "rabbitmq", Scenario: "latency", Size: 12, LatencyP99US: 670, Verified: true},
		{Label: "rabbitmq", Scenario: "transient", Client: "raw", Size: 12, ConsumedPerS: 100000, ClientCPUUSPerMsg: cpu(0.5), Verified: true},
		{Label: "warren", Scenario: "transient", Client: "raw", Size: 12, ConsumedPerS: 900000, ClientCPUUSPerMsg: cpu(0.25), Verified: true},
		{Label: "warren", Scenario: "latency", Size: 12, LatencyP99US: 400, Verified: true},
	}
	var in bytes.Buffer
	in.WriteString("# comment\n\n")
	for _, l := range lines {
		require.NoError(t, json.NewEncoder(&in).Encode(l))
	}
	groups, err := readGroups(&in)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, writeTable(&out, groups, "rabbitmq", "warren", true))
	table := out.String()
	for _, want := range []string{
		"| idle | RSS idle (MiB) | 140.0 | 12.0 | 0.09 | ≤ 20 MiB | yes |",
		"| transient 12 B (warren: 1 of 3 runs NOT verified) | consumed (msg/s) | 50,000 | 110,000 | 2.20 | ≥ 2 | yes |",
		"|  | broker CPU (µs/msg) | 21.9 | 5.00 | 0.23 | ≤ ⅓ | yes |",
		"|  | latency p99 (µs) | 670.0 | 400.0 | 0.60 | ≤ 0.50 | **no** |",
		"|  | peak RSS (MiB) | – | – | – |",
		"| transient 12 B (raw client) | consumed (msg/s) | 100,000 | 900,000 | 9.00 | ≥ 2 | yes |",
		"|  | client CPU (µs/msg) | 0.50 | 0.25 | 0.50 |  |  |",
	} {
		require.Contains(t, table, want, table)
	}

	// Two builds of one broker: no goals, and no goal columns.
	out.Reset()
	require.NoError(t, writeTable(&out, groups, "rabbitmq", "warren", false))
	table = out.String()
	require.Contains(t, table, "| scenario | metric | rabbitmq | warren | warren/rabbitmq |\n|---|---|---:|---:|---:|\n", table)
	require.Contains(t, table, "|  | broker CPU (µs/msg) | 21.9 | 5.00 | 0.23 |\n", table)
	require.NotContains(t, table, "≥", table)

	_, err = readGroups(strings.NewReader("{not json\n"))
	require.ErrorContains(t, err, "line 1")
	err = run(context.Background(), []string{"-table", filepath.Join(t.TempDir(), "missing.jsonl")}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "perftest: table")
}

func TestCell(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{1234567.4, "1,234,567"}, {1000, "1,000"}, {999.94, "999.9"}, {12.345, "12.3"}, {2.345, "2.35"}, {0, "0.00"}} {
		require.Equal(t, tc.want, cell(tc.v, true), fmt.Sprint(tc.v))
	}
	require.Equal(t, "–", cell(1, false))
}

// runJSONLines runs perftest with -json and decodes each line of output.
func runJSONLines(t *testing.T, args ...string) ([]*result, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"-json", "-drain-timeout", "20s", "-dup-grace", "10ms"}, args...), &out, &bytes.Buffer{})
	var res []*result
	dec := json.NewDecoder(&out)
	for dec.More() {
		r := new(result)
		require.NoError(t, dec.Decode(r))
		res = append(res, r)
	}
	return res, err
}

// TestScaleInProcess runs every phase of the scale scenario at a small
// size, the in-process restart included, and checks each reports what
// the table needs.
func TestScaleInProcess(t *testing.T) {
	res, err := runJSONLines(t, "-inprocess", "-data", t.TempDir(), "-scenario", "scale", "-label", "warren",
		"-count", "500", "-size", "1024", "-queues", "20", "-connections", "5", "-settle", "0s", "-confirm-window", "64")
	require.NoError(t, err)
	var got []string
	byScenario := map[string]*result{}
	for _, r := range res {
		got = append(got, r.Scenario)
		byScenario[r.Scenario] = r
		require.True(t, r.Verified, "%+v", r)
		require.NotEmpty(t, r.Title)
	}
	require.Equal(t, []string{"scale-fill", "scale-ready", "scale-drain", "scale-declare", "scale-publish", "scale-delete", "scale-connections"}, got)
	fill := byScenario["scale-fill"]
	require.EqualValues(t, 500, fill.Confirmed)
	require.Positive(t, fill.ConfirmedPerS)
	require.NotNil(t, fill.PerItemKiB)
	require.Equal(t, "fill one queue with 500 msgs", fill.Title)
	require.NotNil(t, byScenario["scale-ready"].ReadyS)
	drain := byScenario["scale-drain"]
	require.EqualValues(t, 500, drain.Consumed)
	require.Zero(t, drain.Lost+drain.Duplicates)
	require.Len(t, drain.Windows, drainWindows)
	require.NotNil(t, drain.DiskStartMiB)
	require.NotNil(t, drain.DiskEndMiB)
	for _, s := range []string{"scale-declare", "scale-publish", "scale-delete", "scale-connections"} {
		require.Positive(t, byScenario[s].OpsPerS, s)
	}
	require.NotNil(t, byScenario["scale-declare"].PerItemKiB)
	require.NotNil(t, byScenario["scale-connections"].PerItemKiB)
	require.EqualValues(t, 20, byScenario["scale-publish"].Confirmed)
}

// TestScaleAgainstURL runs the phases compare.sh runs against a broker
// behind a URL: fill, then (after what would be a restart) drain with
// readiness from the broker process's start time; an in-process restart
// phase is refused with a reason.
func TestScaleAgainstURL(t *testing.T) {
	b, err := broker.New(broker.Options{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	common := []string{"-url", b.URL(), "-broker-pid", strconv.Itoa(os.Getpid()), "-scenario", "scale", "-count", "200", "-settle", "0s"}
	res, err := runJSONLines(t, append(common, "-phases", "fill")...)
	require.NoError(t, err)
	require.Len(t, res, 1)
	res, err = runJSONLines(t, append(common, "-phases", "drain")...)
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.NotNil(t, res[0].ReadyS)
	require.Positive(t, *res[0].ReadyS, "ready counts from this process's start")
	require.EqualValues(t, 200, res[1].Consumed)

	_, err = runJSONLines(t, append(common, "-phases", "restart")...)
	require.ErrorContains(t, err, "restart the broker between")
	_, err = parseFlags([]string{"-scenario", "scale", "-phases", "fill,nope"}, &bytes.Buffer{})
	require.ErrorContains(t, err, `unknown phase "nope"`)
	_, err = parseFlags([]string{"-scenario", "scale", "-phases", "fill,fill"}, &bytes.Buffer{})
	require.ErrorContains(t, err, `"fill" twice`)
}

func TestParseStartTime(t *testing.T) {
	now := time.Unix(1000, 0)
	stat := []byte("42 (we (ird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 12345 19 20")
	got, err := parseStartTime(stat, []byte("200.50 300.00\n"), now)
	require.NoError(t, err)
	// Started 123.45 s after boot, 200.5 s after boot is now.
	require.Equal(t, now.Add(-77050*time.Millisecond), got)
	_, err = parseStartTime([]byte("42 (x) S 1"), []byte("1 1"), now)
	require.ErrorContains(t, err, "too few fields")
	_, err = parseStartTime(stat, []byte("x"), now)
	require.ErrorContains(t, err, "uptime")
}

func TestScaleTable(t *testing.T) {
	v := func(f float64) *float64 { return &f }
	lines := []result{
		{Label: "rabbitmq", Scenario: "scale-fill", Title: "fill one queue with 500,000 msgs", ConfirmedPerS: 13800, RSSPeakMiB: v(4045), PerItemKiB: v(7.5), Verified: true},
		{Label: "warren", Scenario: "scale-fill", Title: "fill one queue with 500,000 msgs", ConfirmedPerS: 46900, RSSPeakMiB: v(181), PerItemKiB: v(0.25), Verified: true},
		{Label: "warren", Scenario: "scale-drain", Title: "drain them (prefetch 1000)", ConsumedPerS: 70000, Windows: []scaleWindow{{PerS: 70000}, {PerS: 63000}}, Verified: true},
	}
	var in bytes.Buffer
	for _, l := range lines {
		require.NoError(t, json.NewEncoder(&in).Encode(l))
	}
	groups, err := readGroups(&in)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, writeTable(&out, groups, "rabbitmq", "warren", true))
	for _, want := range []string{
		"| fill one queue with 500,000 msgs | confirmed (msg/s) | 13,800 | 46,900 | 3.40 | ≥ 1 | yes |",
		"|  | memory per queued message (B) | 7,680 | 256.0 | 0.03 | ≤ 1 | yes |",
		"| drain them (prefetch 1000) | consumed (msg/s) | – | 70,000 | – |",
		"|  | last/first tenth rate (ratio) | – | 0.90 | – |",
	} {
		require.Contains(t, out.String(), want, out.String())
	}
}
