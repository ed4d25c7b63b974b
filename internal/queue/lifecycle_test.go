package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/storage"
)

// The actor's lifecycle (actor.go): its goroutine runs while the queue has
// work and exits once idle; whatever wakes the queue starts it again.

// waitParked waits until q's actor goroutine has exited for want of work.
func waitParked(t *testing.T, q *Queue) {
	t.Helper()
	require.Eventually(t, func() bool { return !q.running.Load() }, 5*time.Second+2*q.idleAfter, time.Millisecond,
		"the actor goroutine is still running")
}

// countingConfirms counts confirmed publishes.
type countingConfirms struct{ ok, failed atomic.Int64 }

func (c *countingConfirms) Confirm(seqs []uint64, err error) {
	if err != nil {
		c.failed.Add(int64(len(seqs)))
		return
	}
	c.ok.Add(int64(len(seqs)))
}

// An idle queue keeps no goroutine, whatever it went through, and keeps
// its state: the next call starts the actor again and sees it.
func TestIdleQueueHasNoGoroutine(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, q *Queue)
		want  Stats
	}{
		{"started", func(*testing.T, *Queue) {}, Stats{}},
		{"holding messages", func(t *testing.T, q *Queue) { publish(t, q, "a", "b") }, Stats{Ready: 2}},
		{"drained by a consumer", func(t *testing.T, q *Queue) {
			s := newSink()
			publish(t, q, "a", "b")
			require.NoError(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Receiver: s}))
			require.NoError(t, q.Settle(Ack, s.next(t).Ref, s.next(t).Ref))
		}, Stats{Consumers: 1}},
		{"a delivery out", func(t *testing.T, q *Queue) {
			publish(t, q, "a", "b")
			getOne(t, q)
		}, Stats{Ready: 1, Unacked: 1}},
		{"requeued", func(t *testing.T, q *Queue) {
			publish(t, q, "a")
			require.NoError(t, q.Settle(Requeue, getOne(t, q).Ref))
		}, Stats{Ready: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1})
			require.NoError(t, err)
			tc.setup(t, q)
			waitParked(t, q)
			goleak.VerifyNone(t, before)
			st, err := q.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.want, st)
			waitParked(t, q)
			q.Stop()
			goleak.VerifyNone(t, before)
		})
	}
}

// Stop and Delete of a queue whose actor is not running, or is, leave no
// goroutine behind, and calls after them fail with ErrDeleted.
func TestStopAndDeleteLeaveNoGoroutine(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		parked bool
		end    func(q *Queue)
	}{
		{"stop parked", true, (*Queue).Stop},
		{"stop running", false, (*Queue).Stop},
		{"delete parked", true, func(q *Queue) { _, _ = q.Delete(ctx) }},
		{"delete running", false, func(q *Queue) { _, _ = q.Delete(ctx) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1})
			require.NoError(t, err)
			publish(t, q, "a")
			if tc.parked {
				waitParked(t, q)
			}
			tc.end(q)
			<-q.Done()
			goleak.VerifyNone(t, before)
			_, err = q.Stats(ctx)
			require.ErrorIs(t, err, ErrDeleted)
			q.Kick() // starts nothing: the actor stopped for good
			q.Stop()
			goleak.VerifyNone(t, before)
		})
	}
}

// Timers need no goroutine: a TTL expiry and x-expires fire on the clock
// and start the actor of a queue that went idle.
func TestTimersWakeAnIdleQueue(t *testing.T) {
	ctx := context.Background()
	t.Run("message TTL", func(t *testing.T) {
		fake := clock.NewFake(time.Unix(100, 0))
		dlq := startNamed(t, "dlq")
		q := startDLX(t, newStores(), amqp.Table{"x-dead-letter-exchange": "", "x-message-ttl": int64(1000)}, fake, func() *Queue { return dlq })
		publish(t, q, "a")
		waitReady(t, q, 1)
		waitParked(t, q)
		fake.Advance(2 * time.Second)
		waitReady(t, q, 0)
		waitReady(t, dlq, 1)
	})
	t.Run("x-expires", func(t *testing.T) {
		fake := clock.NewFake(time.Unix(100, 0))
		a, err := ParseArgs(amqp.Table{"x-expires": int64(1000)})
		require.NoError(t, err)
		expired := make(chan struct{}, 1)
		q, err := Start(ctx, Config{
			VHost: "/", Name: "x", Shard: "/x", Stores: newStores(), Broker: "n1", Incarnation: 1, Clock: fake,
			Features: Features{Args: a, Expired: func() { expired <- struct{}{} }},
		})
		require.NoError(t, err)
		t.Cleanup(q.Stop)
		waitParked(t, q)
		fake.Advance(2 * time.Second)
		<-expired
		require.True(t, q.Unused(ctx))
	})
}

// TestActorStartExitRace hammers a queue whose actor exits as soon as it
// is idle (idleAfter 1ns) with publishes, Kicks, settles and calls from
// many goroutines: every publish is confirmed and delivered once, every
// call answered, and never two actor goroutines at once (enterActor
// panics) nor two holders of the state (the token panics); -race checks
// the hand-offs between the goroutines that come and go.
func TestActorStartExitRace(t *testing.T) {
	// A lost wake-up fails the calls instead of hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	saved := idleAfter
	idleAfter = time.Nanosecond // read by Start: no actor runs yet
	t.Cleanup(func() { idleAfter = saved })
	before := goleak.IgnoreCurrent()
	q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1})
	require.NoError(t, err)
	s := newSink()
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Receiver: s}))

	const workers, each = 4, 300
	var conf countingConfirms
	var settled sync.WaitGroup
	settled.Add(1)
	go func() { // acks, one by one, from the consumer's side
		defer settled.Done()
		for range workers * each {
			select {
			case m := <-s.msgs:
				assert.NoError(t, q.Settle(Ack, m.Ref))
			case <-time.After(10 * time.Second):
				assert.Fail(t, "a publish was not delivered")
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				assert.NoError(t, q.Publish(storage.Record{Body: []byte("x")}, NoTTL, &conf, uint64(i)))
				q.Kick()
				if i%10 == w {
					_, err := q.Stats(ctx)
					assert.NoError(t, err)
				}
				if i%50 == 0 {
					time.Sleep(time.Microsecond) // let the actor go idle
				}
			}
		}()
	}
	wg.Wait()
	settled.Wait()
	require.EqualValues(t, workers*each, conf.ok.Load())
	require.Zero(t, conf.failed.Load())
	s.none(t)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Consumers: 1}, st)
	waitParked(t, q)
	q.Stop()
	goleak.VerifyNone(t, before)
}

// Counts reads what the last step left without waking the actor: after
// each call below (which waits for its step) it equals Stats, and reading
// it leaves a parked queue parked.
func TestCountsNeedNoActor(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	s := newSink()
	var got Message
	for _, step := range []struct {
		name string
		do   func(t *testing.T)
		want Stats
	}{
		{"started", func(*testing.T) {}, Stats{}},
		{"published", func(t *testing.T) { publish(t, q, "a", "b", "c") }, Stats{Ready: 3}},
		{"got in place", func(t *testing.T) { got = getOne(t, q) }, Stats{Ready: 2, Unacked: 1}},
		{"acked in place", func(t *testing.T) { require.NoError(t, q.AckGot(got.Ref)) }, Stats{Ready: 2}},
		{"consumed", func(t *testing.T) {
			require.NoError(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Receiver: s}))
			s.next(t)
			s.next(t)
		}, Stats{Unacked: 2, Consumers: 1}},
	} {
		step.do(t)
		st, err := q.Stats(ctx) // every op before it handled
		require.NoError(t, err, step.name)
		require.Equal(t, step.want, st, step.name)
		waitParked(t, q)
		require.Equal(t, step.want, q.Counts(), step.name)
		require.False(t, q.running.Load(), "%s: Counts woke the actor", step.name)
	}
}
