package unacked_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/unacked"
)

var epoch = time.Unix(1_700_000_000, 0)

// harness wires a Scanner to a MemoryIndex, a settable clock and recording
// callbacks. Requeue behaves as the broker's primitive: it flips entries to
// Returned in the index.
type harness struct {
	index    *unacked.MemoryIndex
	now      time.Time
	leader   bool
	dead     map[string]bool // connections whose owner is gone
	requeued [][]unacked.Entry
	timedOut []unacked.Entry
	scanner  *unacked.Scanner
}

func newHarness(t *testing.T, cfg unacked.ScannerConfig) *harness {
	h := &harness{index: unacked.NewMemoryIndex(), now: epoch, leader: true, dead: map[string]bool{}}
	cfg.Index = h.index
	cfg.Leader = func() bool { return h.leader }
	cfg.Now = func() time.Time { return h.now }
	cfg.Orphaned = func(e unacked.Entry) bool { return h.dead[e.Connection] }
	cfg.Requeue = func(ctx context.Context, entries []unacked.Entry) {
		h.requeued = append(h.requeued, entries)
		back := make([]unacked.Entry, len(entries))
		for i, e := range entries {
			e.State = unacked.Returned
			back[i] = e
		}
		require.NoError(t, h.index.Put(ctx, back))
	}
	if cfg.DeliveryTimeout > 0 {
		cfg.TimedOut = func(_ context.Context, e unacked.Entry) { h.timedOut = append(h.timedOut, e) }
	}
	s, err := unacked.NewScanner(cfg)
	require.NoError(t, err)
	h.scanner = s
	return h
}

// deliver puts a Delivered entry made at the harness's current time.
func (h *harness) deliver(t *testing.T, conn string, offset uint64) unacked.Entry {
	e := unacked.Entry{
		Key:        unacked.Key{VHost: "/", Queue: "q", Offset: offset},
		Connection: conn, Channel: 1, DeliveryTag: offset + 1, Broker: "node-1", Incarnation: 1,
		DeliveredAt: h.now.UnixNano(), DeliveryCount: 1, State: unacked.Delivered,
	}
	require.NoError(t, h.index.Put(context.Background(), []unacked.Entry{e}))
	return e
}

func (h *harness) scan(t *testing.T) {
	require.NoError(t, h.scanner.ScanOnce(context.Background()))
}

func offsets(batches ...[]unacked.Entry) []uint64 {
	var out []uint64
	for _, b := range batches {
		for _, e := range b {
			out = append(out, e.Offset)
		}
	}
	return out
}

func TestScannerRequeuesOrphans(t *testing.T) {
	h := newHarness(t, unacked.ScannerConfig{BatchSize: 2})
	for off := range uint64(5) {
		h.deliver(t, "dead", off)
	}
	h.deliver(t, "alive", 10)
	returned := h.deliver(t, "dead", 11)
	returned.State = unacked.Returned
	require.NoError(t, h.index.Put(context.Background(), []unacked.Entry{returned}))

	h.dead["dead"] = true
	h.scan(t)
	require.Len(t, h.requeued, 3, "5 orphans in batches of 2")
	for _, b := range h.requeued {
		require.LessOrEqual(t, len(b), 2)
	}
	require.ElementsMatch(t, []uint64{0, 1, 2, 3, 4}, offsets(h.requeued...),
		"only Delivered entries of dead owners; Returned ones are left alone")

	h.requeued = nil
	h.scan(t)
	require.Empty(t, h.requeued, "requeued entries are Returned now")
}

func TestScannerFollowerDoesNothing(t *testing.T) {
	h := newHarness(t, unacked.ScannerConfig{DeliveryTimeout: time.Minute})
	h.deliver(t, "dead", 1)
	h.deliver(t, "alive", 2)
	h.dead["dead"] = true
	h.now = h.now.Add(time.Hour)
	h.leader = false
	h.scan(t)
	require.Empty(t, h.requeued)
	require.Empty(t, h.timedOut)
	h.leader = true
	h.scan(t)
	require.Equal(t, []uint64{1}, offsets(h.requeued...))
	require.Equal(t, []uint64{2}, offsets(h.timedOut))
}

func TestScannerDeliveryTimeout(t *testing.T) {
	h := newHarness(t, unacked.ScannerConfig{DeliveryTimeout: time.Minute})
	old := h.deliver(t, "alive", 1)
	h.now = h.now.Add(30 * time.Second)
	h.deliver(t, "alive", 2)
	orphan := h.deliver(t, "dead", 3)
	h.dead["dead"] = true

	steps := []struct {
		advance time.Duration
		want    []uint64 // newly timed out at this pass
	}{
		{30 * time.Second, nil},        // offset 1 is exactly at the timeout: not over it
		{time.Nanosecond, []uint64{1}}, // now it is
		{time.Minute, []uint64{2}},     // 1 is not reported twice
		{time.Hour, nil},               // nor is 2
	}
	for i, st := range steps {
		h.timedOut = nil
		h.now = h.now.Add(st.advance)
		h.scan(t)
		require.Equal(t, st.want, offsets(h.timedOut), "step %d", i)
	}
	require.Equal(t, []uint64{orphan.Offset}, offsets(h.requeued...), "orphans are requeued, not timed out")

	// The channel closed: entry 1 was requeued and delivered again, a new
	// delivery that may time out again.
	again := old
	again.DeliveryTag, again.DeliveredAt, again.DeliveryCount = 99, h.now.UnixNano(), 2
	require.NoError(t, h.index.Put(context.Background(), []unacked.Entry{again}))
	h.timedOut = nil
	h.now = h.now.Add(2 * time.Minute)
	h.scan(t)
	require.Equal(t, []unacked.Entry{again}, h.timedOut)

	// An acked delivery is forgotten: if the same identity showed up again
	// (it cannot in practice) it would be reported afresh, which shows the
	// scanner's memory does not keep settled deliveries.
	require.NoError(t, h.index.Delete(context.Background(), []unacked.Key{again.Key}))
	h.scan(t)
	require.NoError(t, h.index.Put(context.Background(), []unacked.Entry{again}))
	h.timedOut = nil
	h.scan(t)
	require.Equal(t, []unacked.Entry{again}, h.timedOut)
}

func TestScannerTimeoutDisabled(t *testing.T) {
	h := newHarness(t, unacked.ScannerConfig{})
	h.deliver(t, "alive", 1)
	h.now = h.now.Add(1000 * time.Hour)
	h.scan(t)
	require.Empty(t, h.timedOut)
	require.Empty(t, h.requeued)
}

func TestScannerPassLimit(t *testing.T) {
	h := newHarness(t, unacked.ScannerConfig{PassLimit: 4, BatchSize: 3})
	for off := range uint64(10) {
		h.deliver(t, "dead", off)
	}
	h.dead["dead"] = true
	var perPass []int
	for range 4 {
		h.requeued = nil
		h.scan(t)
		perPass = append(perPass, len(offsets(h.requeued...)))
	}
	require.Equal(t, []int{4, 4, 2, 0}, perPass)
}

func TestScannerLeadershipLossForgetsReports(t *testing.T) {
	h := newHarness(t, unacked.ScannerConfig{DeliveryTimeout: time.Second})
	h.deliver(t, "alive", 1)
	h.now = h.now.Add(time.Minute)
	h.scan(t)
	h.leader = false
	h.scan(t)
	h.leader = true
	h.scan(t)
	require.Equal(t, []uint64{1, 1}, offsets(h.timedOut),
		"after losing and regaining leadership a still-stuck delivery is reported again")
}

type failingIndex struct{ unacked.Index }

func (failingIndex) Scan(context.Context, func(unacked.Entry) bool) error {
	return errors.New("disk on fire")
}

func TestScannerErrors(t *testing.T) {
	s, err := unacked.NewScanner(unacked.ScannerConfig{Index: failingIndex{}})
	require.NoError(t, err)
	require.ErrorContains(t, s.ScanOnce(context.Background()), "unacked: scan: disk on fire")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err = unacked.NewScanner(unacked.ScannerConfig{Index: unacked.NewMemoryIndex()})
	require.NoError(t, err)
	require.ErrorIs(t, s.ScanOnce(ctx), context.Canceled)
}

func TestNewScannerValidates(t *testing.T) {
	noop := func(context.Context, []unacked.Entry) {}
	tests := []struct {
		name  string
		cfg   unacked.ScannerConfig
		wants []string // every problem is reported at once
	}{
		{"ok-minimal", unacked.ScannerConfig{Index: unacked.NewMemoryIndex()}, nil},
		{"ok-full", unacked.ScannerConfig{Index: unacked.NewMemoryIndex(), Orphaned: func(unacked.Entry) bool { return false },
			Requeue: noop, DeliveryTimeout: time.Second, TimedOut: func(context.Context, unacked.Entry) {}}, nil},
		{"everything-wrong", unacked.ScannerConfig{Interval: -1, BatchSize: -1, PassLimit: -1, DeliveryTimeout: -1},
			[]string{"needs an Index", "Interval", "BatchSize", "PassLimit", "DeliveryTimeout -1ns is negative"}},
		{"timeout-without-callback", unacked.ScannerConfig{Index: unacked.NewMemoryIndex(), DeliveryTimeout: time.Second},
			[]string{"no TimedOut"}},
		{"orphaned-without-requeue", unacked.ScannerConfig{Index: unacked.NewMemoryIndex(),
			Orphaned: func(unacked.Entry) bool { return true }}, []string{"no Requeue"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := unacked.NewScanner(tt.cfg)
			if tt.wants == nil {
				require.NoError(t, err)
				require.NotNil(t, s)
				return
			}
			require.Nil(t, s)
			for _, w := range tt.wants {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

// TestScannerRun checks Run makes its first pass at once and returns when
// its context ends. The interval is long so only that first pass happens.
func TestScannerRun(t *testing.T) {
	x := unacked.NewMemoryIndex()
	require.NoError(t, x.Put(context.Background(), []unacked.Entry{
		{Key: unacked.Key{VHost: "/", Queue: "q"}, Connection: "dead", State: unacked.Delivered},
	}))
	passed := make(chan []unacked.Entry, 1)
	s, err := unacked.NewScanner(unacked.ScannerConfig{
		Index:    x,
		Interval: time.Hour,
		Orphaned: func(unacked.Entry) bool { return true },
		Requeue:  func(_ context.Context, entries []unacked.Entry) { passed <- entries },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	got := <-passed
	require.Len(t, got, 1)
	cancel()
	wg.Wait()
}

// TestScannerConcurrentPasses runs passes from several goroutines: they must
// not overlap, so each orphan is requeued exactly once.
func TestScannerConcurrentPasses(t *testing.T) {
	x := unacked.NewMemoryIndex()
	var entries []unacked.Entry
	for off := range uint64(100) {
		entries = append(entries, unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q", Offset: off}, State: unacked.Delivered})
	}
	require.NoError(t, x.Put(context.Background(), entries))
	var mu sync.Mutex
	count := map[uint64]int{}
	s, err := unacked.NewScanner(unacked.ScannerConfig{
		Index:    x,
		Orphaned: func(unacked.Entry) bool { return true },
		Requeue: func(ctx context.Context, batch []unacked.Entry) {
			mu.Lock()
			for _, e := range batch {
				count[e.Offset]++
			}
			mu.Unlock()
			back := make([]unacked.Entry, len(batch))
			for i, e := range batch {
				e.State = unacked.Returned
				back[i] = e
			}
			_ = x.Put(ctx, back)
		},
	})
	require.NoError(t, err)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = s.ScanOnce(context.Background()) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Len(t, count, 100)
	for off, n := range count {
		require.Equal(t, 1, n, "offset %d", off)
	}
}
