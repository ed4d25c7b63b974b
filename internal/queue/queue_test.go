package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// sink is a Receiver that records deliveries and cancellations.
type sink struct {
	mu        sync.Mutex
	msgs      chan Message
	closed    bool
	cancelled chan string
}

func newSink() *sink {
	return &sink{msgs: make(chan Message, 10000), cancelled: make(chan string, 10)}
}

func (s *sink) Deliver(c *Consumer, m Message) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.msgs <- m
	return true
}

func (s *sink) Cancelled(c *Consumer) { s.cancelled <- c.Tag }

// close refuses further deliveries and closes msgs, for a goroutine that
// ranges over it.
func (s *sink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.msgs)
	}
}

func (s *sink) next(t *testing.T) Message {
	t.Helper()
	select {
	case m := <-s.msgs:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery")
		return Message{}
	}
}

func (s *sink) none(t *testing.T) {
	t.Helper()
	select {
	case m := <-s.msgs:
		t.Fatalf("unexpected delivery of offset %d", m.Offset)
	case <-time.After(20 * time.Millisecond):
	}
}

func newStores() Stores {
	return Stores{Shards: memory.New(), Cursors: metamemory.New(), Index: unacked.NewMemoryIndex()}
}

func start(t *testing.T, s Stores) *Queue {
	t.Helper()
	q, err := Start(context.Background(), Config{VHost: "/", Name: "q", Shard: "/q", Stores: s, Broker: "n1", Incarnation: 1})
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	return q
}

func publish(t *testing.T, q *Queue, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		require.NoError(t, q.Publish(storage.Record{Body: []byte(b), Persistent: true}, NoTTL, nil, 0))
	}
}

func bodies(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i)
	}
	return out
}

var owner = Owner{Connection: "c1", Channel: 1}

func TestConsumeInOrderWithPrefetch(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	publish(t, q, bodies(10)...)
	s := newSink()
	credit := &Credit{}
	credit.SetLimit(3)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "a", Owner: owner, Credit: credit, Receiver: s}))
	var got []Message
	for range 3 {
		got = append(got, s.next(t))
	}
	s.none(t) // prefetch 3 reached
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Ready: 7, Unacked: 3, Consumers: 1}, st)

	for len(got) < 10 {
		m := got[len(got)-3]
		require.NoError(t, q.Settle(Ack, m.Ref))
		credit.Release(1)
		q.Kick()
		got = append(got, s.next(t))
	}
	for i, m := range got {
		require.Equal(t, fmt.Sprintf("m%d", i), string(m.Body))
		require.False(t, m.Redelivered)
		require.EqualValues(t, 1, m.DeliveryCount)
	}
}

func TestRequeueKeepsPosition(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	publish(t, q, "a", "b", "c")
	s := newSink()
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "x", Owner: owner, Receiver: s}))
	a, b, c := s.next(t), s.next(t), s.next(t)
	_, err := q.Cancel(ctx, owner, "x")
	require.NoError(t, err)
	require.NoError(t, q.Settle(Requeue, c.Ref, a.Ref))
	// A second requeue and a late ack of the same deliveries do nothing.
	require.NoError(t, q.Settle(Requeue, a.Ref))
	require.NoError(t, q.Settle(Ack, a.Ref))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Ready: 2, Unacked: 1}, st)

	m, ready, ok, err := q.Get(ctx, owner, false)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "a", string(m.Body))
	require.True(t, m.Redelivered)
	require.EqualValues(t, 2, m.DeliveryCount)
	require.EqualValues(t, 1, ready)
	m2, _, ok, err := q.Get(ctx, owner, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "c", string(m2.Body))
	_, _, ok, err = q.Get(ctx, owner, false)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, q.Settle(Ack, b.Ref, m.Ref))
	st, err = q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{}, st)
}

func TestGetAndConsumeShareTheCursor(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	const n = 2000
	s := newSink()
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "x", Owner: owner, NoAck: true, Receiver: s}))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			_ = q.Publish(storage.Record{Body: []byte(fmt.Sprint(i))}, NoTTL, nil, 0)
		}
	}()
	seen := make(map[string]int)
	for len(seen) < n {
		m, _, ok, err := q.Get(ctx, Owner{Connection: "c2", Channel: 1}, true)
		require.NoError(t, err)
		if ok {
			seen[string(m.Body)]++
		}
	drain:
		for {
			select {
			case m := <-s.msgs:
				seen[string(m.Body)]++
			default:
				break drain
			}
		}
	}
	wg.Wait()
	for k, c := range seen {
		require.Equal(t, 1, c, "message %s seen %d times", k, c)
	}
	require.Len(t, seen, n)
}

func TestRecoveryReturnsUnackedInPlace(t *testing.T) {
	ctx := context.Background()
	s := newStores()
	q := start(t, s)
	publish(t, q, "a", "b", "c", "d")
	sk := newSink()
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "x", Owner: owner, Receiver: sk}))
	a, b := sk.next(t), sk.next(t)
	sk.next(t)
	sk.next(t)
	require.NoError(t, q.Settle(Ack, b.Ref))
	_ = a
	_, err := q.Stats(ctx) // the ack is processed
	require.NoError(t, err)
	q.Stop()

	q2 := start(t, s)
	st, err := q2.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Ready: 3}, st)
	for _, want := range []string{"a", "c", "d"} {
		m, _, ok, err := q2.Get(ctx, owner, true)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want, string(m.Body))
		require.True(t, m.Redelivered)
	}
}

func TestDeleteCancelsConsumers(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	publish(t, q, "a", "b")
	s := newSink()
	credit := &Credit{}
	credit.SetLimit(1)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "x", Owner: owner, Credit: credit, Receiver: s}))
	s.next(t)
	n, err := q.Delete(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, "x", <-s.cancelled)
	require.ErrorIs(t, q.Publish(storage.Record{}, NoTTL, nil, 0), ErrDeleted)
	_, err = q.Stats(ctx)
	require.ErrorIs(t, err, ErrDeleted)
}

func TestPurge(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	publish(t, q, bodies(5)...)
	m, _, ok, err := q.Get(ctx, owner, false)
	require.NoError(t, err)
	require.True(t, ok)
	n, err := q.Purge(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	require.NoError(t, q.Settle(Requeue, m.Ref))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Ready: 1}, st)
	publish(t, q, "new")
	m, _, _, err = q.Get(ctx, owner, true)
	require.NoError(t, err)
	require.Equal(t, "m0", string(m.Body))
	m, _, _, err = q.Get(ctx, owner, true)
	require.NoError(t, err)
	require.Equal(t, "new", string(m.Body))
}

func TestExclusiveConsumer(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	s := newSink()
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "a", Owner: owner, Receiver: s}))
	require.ErrorIs(t, q.Consume(ctx, &Consumer{Tag: "b", Owner: owner, Exclusive: true, Receiver: s}), ErrConsumersExist)
	_, err := q.Cancel(ctx, owner, "a")
	require.NoError(t, err)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "b", Owner: owner, Exclusive: true, Receiver: s}))
	require.ErrorIs(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Receiver: s}), ErrExclusiveConsumer)
}

type confirmLog struct {
	mu   sync.Mutex
	seqs []uint64
}

func (c *confirmLog) Confirm(seqs []uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.seqs = append(c.seqs, seqs...)
	}
}

func TestConfirmAfterStore(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	var log confirmLog
	for i := uint64(1); i <= 100; i++ {
		require.NoError(t, q.Publish(storage.Record{Body: []byte("x")}, NoTTL, &log, i))
	}
	_, err := q.Stats(ctx)
	require.NoError(t, err)
	log.mu.Lock()
	defer log.mu.Unlock()
	require.Len(t, log.seqs, 100)
	for i, s := range log.seqs {
		require.EqualValues(t, i+1, s)
	}
}

// Deliveries are recycled once settled: interleaved gets, acks and
// requeues must never mix up which message a delivery holds.
func TestRecycledDeliveriesKeepTheirMessages(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	const n = 300
	publish(t, q, bodies(n)...)
	acked := map[string]bool{}
	for round := 0; len(acked) < n; round++ {
		var held []Message
		for {
			m, _, ok, err := q.Get(ctx, owner, false)
			require.NoError(t, err)
			if !ok {
				break
			}
			require.False(t, acked[string(m.Body)], "%s came back after its ack", m.Body)
			require.Regexp(t, `^m\d+$`, string(m.Body), "the message itself survived its requeues")
			held = append(held, m)
		}
		require.NotEmpty(t, held)
		// Ack every third, requeue the rest (one call each, so settles
		// and requeues interleave with fresh deliveries of earlier rounds).
		for i, m := range held {
			if (i+round)%3 == 0 || round > 5 {
				require.NoError(t, q.Settle(Ack, m.Ref))
				acked[string(m.Body)] = true
			} else {
				require.NoError(t, q.Settle(Requeue, m.Ref))
			}
		}
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, Stats{Ready: uint64(n - len(acked))}, st)
	}
}

// A PublishBatch is that many Publish calls in one hand-off: the records
// are stored in order after what came before them, each confirmed, a
// batch larger than the mailbox's bound included; a stopped queue takes
// none of it.
func TestPublishBatch(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 3, maxMailbox + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			q := start(t, newStores())
			publish(t, q, "first")
			var log confirmLog
			ps := make([]Publishing, n)
			for i := range ps {
				ps[i] = Publishing{Rec: storage.Record{Body: fmt.Appendf(nil, "m%d", i)}, TTL: NoTTL, Conf: &log, Seq: uint64(i + 1)}
			}
			require.NoError(t, q.PublishBatch(ps))
			st, err := q.Stats(ctx)
			require.NoError(t, err)
			require.EqualValues(t, n+1, st.Ready)
			log.mu.Lock()
			require.Len(t, log.seqs, n)
			for i, s := range log.seqs {
				require.EqualValues(t, i+1, s)
			}
			log.mu.Unlock()
			s := newSink()
			require.NoError(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, NoAck: true, Receiver: s}))
			require.Equal(t, "first", string(s.next(t).Body))
			for i := range n {
				require.Equal(t, fmt.Sprintf("m%d", i), string(s.next(t).Body))
			}
			q.Stop()
			require.ErrorIs(t, q.PublishBatch(ps), ErrDeleted)
		})
	}
}
