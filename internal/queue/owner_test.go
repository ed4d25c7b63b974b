package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// inPlaceOps reads how many ops ran in place, holding the token as every
// reader of the state must.
func inPlaceOps(q *Queue) uint64 {
	q.own.acquire()
	defer q.own.release()
	return q.own.inPlace
}

// holderSink is a consumer that records who held the state token when
// each Deliver ran (Deliver works on the state's behalf, so somebody
// must) and hands the deliveries to an acking goroutine.
type holderSink struct {
	q       *Queue
	msgs    chan Message
	byActor atomic.Int64
	byCall  atomic.Int64
	byNone  atomic.Int64
}

func (s *holderSink) Deliver(c *Consumer, m Message) bool {
	switch s.q.own.holder { // Deliver runs holding the token: a plain read
	case holderActor:
		s.byActor.Add(1)
	case holderCaller:
		s.byCall.Add(1)
	default:
		s.byNone.Add(1)
	}
	s.msgs <- m
	return true
}

func (s *holderSink) Cancelled(*Consumer) {}

// The state token passes between the actor and Get/AckGot callers while
// the actor serves a consumer, publishers publish and deliveries are
// requeued: run under -race, any touch of the state by two goroutines
// without a hand-off between them is reported. Every delivery happens
// with the token held, both kinds of holder serve, the in-place path
// really runs, and every message is settled exactly once.
func TestOwnershipHandOff(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	const total = 2 * 1000
	s := &holderSink{q: q, msgs: make(chan Message, total)}
	settled := getRace{
		publishers: 2, perPublisher: 1000, getters: 2,
		credit: 10, requeueEvery: 5,
		receiver: s, msgs: s.msgs, stop: func() { close(s.msgs) },
		// The actor is idle now: a get must be able to take the token.
		beforeStop: func() {
			for i := 0; inPlaceOps(q) == 0 && i < 10_000; i++ {
				_, _, _, err := q.Get(ctx, owner, false)
				require.NoError(t, err)
				runtime.Gosched()
			}
		},
	}.run(t, q)

	for body, n := range settled {
		require.Equal(t, 1, n, "%s settled %d times", body, n)
	}
	require.Len(t, settled, total)
	require.NotZero(t, inPlaceOps(q), "no op ever ran in place")
	require.Zero(t, s.byNone.Load(), "a delivery ran with nobody holding the token")
	require.NotZero(t, s.byActor.Load(), "the actor never delivered")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Consumers: 1}, st)
}

// getRace is a run in which publishers publish, a consumer acks its
// deliveries but requeues every requeueEvery-th one (so it is redelivered
// later, maybe to a get), and getters Get and AckGot on their own
// goroutines, all at once, until every message is settled.
type getRace struct {
	publishers, perPublisher, getters int
	credit                            uint16
	requeueEvery                      int

	receiver Receiver       // the consumer's receiver
	msgs     <-chan Message // what receiver was handed
	stop     func()         // closes msgs
	// beforeStop, if set, runs once publishers and getters are done,
	// while the consumer is still attached.
	beforeStop func()
}

// run runs the race on q and returns how many times each body was
// settled (acked by the consumer or got and acked by a getter).
func (r getRace) run(t *testing.T, q *Queue) map[string]int {
	t.Helper()
	ctx := context.Background()
	total := r.publishers * r.perPublisher

	var mu sync.Mutex
	settled := make(map[string]int)
	settle := func(body string) {
		mu.Lock()
		settled[body]++
		mu.Unlock()
	}
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(settled) == total
	}

	credit := &Credit{}
	credit.SetLimit(r.credit)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Credit: credit, Receiver: r.receiver}))
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		n := 0
		for m := range r.msgs {
			if n++; n%r.requeueEvery == 0 {
				_ = q.Settle(Requeue, m.Ref)
			} else {
				_ = q.Settle(Ack, m.Ref)
				settle(string(m.Body))
			}
			credit.Release(1)
			q.Kick()
		}
	}()

	var wg sync.WaitGroup
	for p := range r.publishers {
		wg.Go(func() {
			for i := range r.perPublisher {
				_ = q.Publish(storage.Record{Body: fmt.Appendf(nil, "p%d-%d", p, i)}, NoTTL, nil, 0)
			}
		})
	}
	for g := range r.getters {
		wg.Go(func() {
			o := Owner{Connection: fmt.Sprint("g", g), Channel: 1}
			for !done() {
				m, _, ok, err := q.Get(ctx, o, false)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					settle(string(m.Body))
					if err := q.AckGot(m.Ref); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if r.beforeStop != nil {
		r.beforeStop()
	}
	r.stop()
	<-consumerDone
	return settled
}

// Working on the state without the token is a bug the token catches: the
// step's entry points panic, and do not once the token is held.
func TestStateWorkedOnWithoutTokenPanics(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	publish(t, q, bodies(3)...)
	_, err := q.Stats(ctx) // every op handled: nothing will wake the actor
	require.NoError(t, err)
	// Its idle timer would: wait until the goroutine is gone, and (it
	// gives the token up last) the token is free.
	waitParked(t, q)
	for !q.own.tryAcquire() {
		runtime.Gosched()
	}
	q.own.release()

	require.PanicsWithValue(t, "queue: state worked on without its token", func() { q.afterOps(ctx) })
	require.PanicsWithValue(t, "queue: state worked on without its token", func() { q.exec(ctx, op{kind: opStats}) })

	for !q.own.tryAcquire() {
		runtime.Gosched()
	}
	require.Equal(t, holderCaller, q.own.holder)
	var r reply
	require.NotPanics(t, func() { r = q.exec(ctx, op{kind: opStats}) })
	q.own.release()
	require.Equal(t, uint64(3), r.stats.Ready)
	require.Equal(t, holderNone, q.own.holder)
}

// A shared queue never hands its state to a caller: its answers wait on
// changes other brokers made, which only the actor applies.
func TestSharedQueueKeepsTheMailbox(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	a := n.start(t, "a", 1)
	publish(t, a, bodies(20)...)
	for range 20 {
		m, _, ok, err := a.Get(ctx, owner, false)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, a.AckGot(m.Ref))
	}
	require.Zero(t, inPlaceOps(a))
}
