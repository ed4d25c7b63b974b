package delayed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
)

// routed records what a scheduler routed, and when by its clock.
type routed struct {
	mu   sync.Mutex
	c    clock.Clock
	got  []string
	at   []time.Time
	fail int // fail this many calls first
	ch   chan struct{}
}

func (r *routed) route(_ context.Context, msgs []Message, done func(error)) {
	done(r.routeSync(msgs))
}

func (r *routed) routeSync(msgs []Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errors.New("queue store failed")
	}
	for _, m := range msgs {
		r.got = append(r.got, string(m.Body))
		r.at = append(r.at, r.c.Now())
	}
	select {
	case r.ch <- struct{}{}:
	default:
	}
	return nil
}

func (r *routed) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func TestSchedulerFakeClock(t *testing.T) {
	ctx := context.Background()
	start := time.Unix(1_700_000_000, 0)
	fc := clock.NewFake(start)
	r := &routed{c: fc, ch: make(chan struct{}, 1)}
	st := NewMemory(nil)
	s := NewScheduler(fc, r.route, nil, st)
	s.Start()
	defer s.Close()

	hold := func(body string, delay int64) {
		m := Message{VHost: "/", Exchange: "x", Body: []byte(body), Delay: delay}
		require.NoError(t, s.Hold(ctx, st, &m, true))
	}
	hold("c", 3000)
	hold("a", 1000)
	hold("b", 2000)
	hold("b2", 2000) // same due time: publish order
	require.EqualValues(t, 4, st.Count("/", "x"))

	waitFor := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { return len(r.snapshot()) >= n }, 5*time.Second, time.Millisecond)
	}
	fc.Advance(999 * time.Millisecond)
	// Nothing is due: give the goroutine a chance to misbehave.
	require.Never(t, func() bool { return len(r.snapshot()) > 0 }, 50*time.Millisecond, 5*time.Millisecond)
	fc.Advance(time.Millisecond)
	waitFor(1)
	fc.Advance(time.Second)
	waitFor(3)
	fc.Advance(time.Second)
	waitFor(4)
	require.Equal(t, []string{"a", "b", "b2", "c"}, r.snapshot())
	for i, d := range []time.Duration{1, 2, 2, 3} {
		require.Equal(t, start.Add(d*time.Second), r.at[i], "message %d routed at its due time by the clock", i)
	}
	require.Eventually(t, func() bool { return st.Len() == 0 }, 5*time.Second, time.Millisecond)

	// A message due before the timer's deadline wakes it.
	hold("late", 10_000)
	hold("soon", 10)
	fc.Advance(10 * time.Millisecond)
	waitFor(5)
	require.Equal(t, "soon", r.snapshot()[4])
}

func TestSchedulerRetriesAfterRouteError(t *testing.T) {
	ctx := context.Background()
	fc := clock.NewFake(time.Unix(0, 0))
	r := &routed{c: fc, fail: 1, ch: make(chan struct{}, 1)}
	st := NewMemory(nil)
	s := NewScheduler(fc, r.route, nil, st)
	s.Start()
	defer s.Close()
	m := Message{VHost: "/", Exchange: "x", Body: []byte("m"), Delay: 5}
	require.NoError(t, s.Hold(ctx, st, &m, false))
	fc.Advance(5 * time.Millisecond)
	// The failed batch stays held and is retried (after retryAfter, or
	// sooner when something wakes the scheduler). retryAfter counts from
	// when the scheduler takes the router's answer (reap), which may come
	// after the router returned it: the clock moves on only once the
	// retry timer is armed, or the retry would be due a retryAfter past
	// the clock's last move and never fire.
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		// The timer for the first due time was stopped before the
		// route, so the one pending now is the retry's.
		return r.fail == 0 && fc.Pending() == 1
	}, 5*time.Second, time.Millisecond)
	fc.Advance(retryAfter)
	require.Eventually(t, func() bool { return len(r.snapshot()) == 1 }, 5*time.Second, time.Millisecond)
}

func TestSchedulerCloseUnstarted(t *testing.T) {
	s := NewScheduler(clock.Real, func(_ context.Context, _ []Message, done func(error)) { done(nil) }, nil, NewMemory(nil))
	s.Close()
	s.Close()
}
