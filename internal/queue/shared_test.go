package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/sharedtest"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// nodes is one queue served by several actors on one sharedtest store, as
// the brokers of a cluster's nodes serve it: every change the store applies
// reaches every running actor's Observe.
type nodes struct {
	s  *sharedtest.Stores
	mu sync.Mutex
	qs map[string]*Queue // by broker name
}

func newNodes(t *testing.T) *nodes {
	n := &nodes{s: sharedtest.New(), qs: make(map[string]*Queue)}
	cancel := n.s.Watch(func(c meta.Change) {
		n.mu.Lock()
		qs := make([]*Queue, 0, len(n.qs))
		for _, q := range n.qs {
			qs = append(qs, q)
		}
		n.mu.Unlock()
		for _, q := range qs {
			q.Observe(c)
		}
	})
	t.Cleanup(cancel)
	return n
}

func (n *nodes) stores() Stores {
	return Stores{Shards: n.s.Shards, Cursors: n.s.Meta, Index: n.s.Index}
}

// start starts broker's actor on the shared queue (a restart replaces the
// earlier one in the feed).
func (n *nodes) start(t *testing.T, broker string, incarnation uint64) *Queue {
	t.Helper()
	q, err := Start(context.Background(), Config{
		VHost: "/", Name: "q", Shard: "/q", Stores: n.stores(),
		Broker: broker, Incarnation: incarnation, Shared: true,
	})
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	n.mu.Lock()
	n.qs[broker] = q
	n.mu.Unlock()
	return q
}

// entries returns the index entries of the queue.
func (n *nodes) entries(t *testing.T) []unacked.Entry {
	t.Helper()
	var es []unacked.Entry
	require.NoError(t, n.s.Index.Queue(context.Background(), "/", "q", func(e unacked.Entry) bool {
		es = append(es, e)
		return true
	}))
	return es
}

func TestSharedNeedsAClaimer(t *testing.T) {
	_, err := Start(context.Background(), Config{VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "a", Shared: true})
	require.ErrorContains(t, err, "queue: q: shared mode needs an unacked.Claimer")
}

func TestSharedPublishOnAConsumeOnB(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	a, b := n.start(t, "a", 1), n.start(t, "b", 1)
	sk := newSink()
	require.NoError(t, b.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Receiver: sk}))
	publish(t, a, bodies(100)...)
	seen := map[string]int{}
	for range 100 {
		m := sk.next(t)
		require.False(t, m.Redelivered)
		seen[string(m.Body)]++
		require.NoError(t, b.Settle(Ack, m.Ref))
	}
	sk.none(t)
	for _, body := range bodies(100) {
		require.Equal(t, 1, seen[body], body)
	}
	for _, q := range []*Queue{a, b} {
		waitReady(t, q, 0)
	}
	require.Empty(t, n.entries(t))
}

func TestSharedConsumersOnBothDeliverEachMessageOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		requeueOf int // every requeueOf-th message is requeued at its first delivery; 0 none
	}{
		{"ack", 0},
		{"requeue", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			n := newNodes(t)
			a, b := n.start(t, "a", 1), n.start(t, "b", 1)
			const total = 5000
			acked := make(chan string, 2*total)
			var settlers sync.WaitGroup
			perNode := make([]int, 2)
			var sinks []*sink
			t.Cleanup(func() {
				for _, sk := range sinks {
					sk.close()
				}
				settlers.Wait()
			})
			for i, q := range []*Queue{a, b} {
				sk := &sink{msgs: make(chan Message, 2*total), cancelled: make(chan string, 1)}
				sinks = append(sinks, sk)
				require.NoError(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Receiver: sk}))
				settlers.Add(1)
				go func() { // the channel side: settles what the actor delivered
					defer settlers.Done()
					for m := range sk.msgs {
						perNode[i]++
						var k int
						_, _ = fmt.Sscanf(string(m.Body[2:]), "%d", &k)
						if tc.requeueOf > 0 && k%tc.requeueOf == 0 && !m.Redelivered {
							_ = q.Settle(Requeue, m.Ref)
							continue
						}
						_ = q.Settle(Ack, m.Ref)
						acked <- string(m.Body)
					}
				}()
			}
			var wg sync.WaitGroup
			for i, q := range []*Queue{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range total / 2 {
						_ = q.Publish(storage.Record{Body: fmt.Appendf(nil, "%s-%d", []string{"a", "b"}[i], j)}, NoTTL, nil, 0)
					}
				}()
			}
			wg.Wait()
			seen := make(map[string]int, total)
			for len(seen) < total {
				select {
				case body := <-acked:
					seen[body]++
				case <-time.After(10 * time.Second):
					require.FailNow(t, "messages lost", "%d of %d delivered", len(seen), total)
				}
			}
			for _, q := range []*Queue{a, b} {
				waitReady(t, q, 0)
			}
			for len(acked) > 0 {
				seen[<-acked]++
			}
			for body, c := range seen {
				require.Equal(t, 1, c, "%s acked %d times", body, c)
			}
			require.Len(t, seen, total)
			t.Logf("deliveries: a %d, b %d", perNode[0], perNode[1])
		})
	}
}

func TestSharedRequeueOnAIsServedOnB(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	a, b := n.start(t, "a", 1), n.start(t, "b", 1)
	publish(t, a, "x")
	m := mustGet(t, a)
	require.False(t, m.Redelivered)

	sk := newSink()
	require.NoError(t, b.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Receiver: sk}))
	sk.none(t) // A holds it
	require.NoError(t, a.Settle(Requeue, m.Ref))
	got := sk.next(t)
	require.Equal(t, "x", string(got.Body))
	require.True(t, got.Redelivered)
	require.EqualValues(t, 2, got.DeliveryCount)
	require.NoError(t, b.Settle(Ack, got.Ref))
	waitReady(t, a, 0)
	st, err := a.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{}, st)
	waitReady(t, b, 0)
	require.Empty(t, n.entries(t))
}

func TestSharedConcurrentGetsAreDisjoint(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	a, b := n.start(t, "a", 1), n.start(t, "b", 1)
	const total = 2000
	publish(t, a, bodies(total/2)...)
	for i := range total / 2 {
		require.NoError(t, b.Publish(storage.Record{Body: fmt.Appendf(nil, "b%d", i)}, NoTTL, nil, 0))
	}
	waitReady(t, a, total)
	waitReady(t, b, total)

	var wg sync.WaitGroup
	got := make([][]string, 2)
	errs := make([]error, 2)
	for i, q := range []*Queue{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				// Every other get settles at once (no-ack), so both
				// kinds of claim race.
				noAck := len(got[i])%2 == 0
				m, _, ok, err := q.Get(ctx, Owner{Connection: "c", Channel: uint16(i + 1)}, noAck)
				if err != nil {
					errs[i] = err
					return
				}
				if !ok {
					return
				}
				got[i] = append(got[i], string(m.Body))
				if !noAck {
					_ = q.Settle(Ack, m.Ref)
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	seen := map[string]int{}
	for _, bs := range got {
		for _, body := range bs {
			seen[body]++
		}
	}
	require.Len(t, seen, total)
	for body, c := range seen {
		require.Equal(t, 1, c, "%s got %d times", body, c)
	}
}

func TestSharedScannerReturnsADeadBrokersDeliveries(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	a, b := n.start(t, "a", 1), n.start(t, "b", 1)
	publish(t, a, "m0", "m1", "m2", "m3")
	var held []Message
	for range 3 {
		m := mustGet(t, a)
		held = append(held, m)
	}
	a.Stop() // A "died" holding three deliveries

	var orphans []unacked.Entry
	for _, e := range n.entries(t) {
		require.Equal(t, "a", e.Broker)
		require.Equal(t, unacked.Delivered, e.State)
		orphans = append(orphans, e)
	}
	require.Len(t, orphans, 3)
	waitReady(t, b, 1)
	require.NoError(t, b.RequeueEntries(orphans))
	sk := newSink()
	require.NoError(t, b.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Receiver: sk}))
	seen := map[string]bool{}
	for range 4 {
		m := sk.next(t)
		seen[string(m.Body)] = true
		require.Equal(t, m.Body[1] != '3', m.Redelivered, "%s", m.Body)
		require.NoError(t, b.Settle(Ack, m.Ref))
	}
	sk.none(t)
	require.Len(t, seen, 4)
	waitReady(t, b, 0)
	require.Empty(t, n.entries(t))
}

func TestSharedRestartReturnsOnlyItsOwnDeliveries(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	a, b := n.start(t, "a", 1), n.start(t, "b", 1)
	publish(t, a, bodies(10)...)
	waitReady(t, b, 10)
	heldBy := map[string][]Message{}
	for _, x := range []struct {
		name string
		q    *Queue
	}{{"a", a}, {"b", b}, {"a", a}, {"b", b}, {"a", a}, {"b", b}} {
		m := mustGet(t, x.q)
		heldBy[x.name] = append(heldBy[x.name], m)
	}
	a.Stop()
	a2 := n.start(t, "a", 2)

	for _, e := range n.entries(t) {
		switch e.Broker {
		case "a":
			require.Equal(t, unacked.Returned, e.State, "offset %d", e.Offset)
		case "b":
			require.Equal(t, unacked.Delivered, e.State, "offset %d", e.Offset)
		}
	}
	st, err := a2.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Ready: 4 + 3}, st)

	bHolds := map[string]bool{}
	for _, m := range heldBy["b"] {
		bHolds[string(m.Body)] = true
	}
	aHeld := map[string]bool{}
	for _, m := range heldBy["a"] {
		aHeld[string(m.Body)] = true
	}
	for range 7 {
		m, _, ok, err := a2.Get(ctx, owner, true)
		require.NoError(t, err)
		require.True(t, ok)
		require.False(t, bHolds[string(m.Body)], "%s is B's", m.Body)
		require.Equal(t, aHeld[string(m.Body)], m.Redelivered, "%s", m.Body)
	}
	_, _, ok, err := a2.Get(ctx, owner, true)
	require.NoError(t, err)
	require.False(t, ok)

	// B's deliveries are still B's to settle.
	for _, m := range heldBy["b"] {
		require.NoError(t, b.Settle(Ack, m.Ref))
	}
	waitReady(t, b, 0)
	require.Empty(t, n.entries(t))
}

// blockingSink blocks the first Deliver until release is closed, so the
// actor is busy while the test floods Observe.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	msgs    chan Message
}

func (s *blockingSink) Deliver(c *Consumer, m Message) bool {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	s.msgs <- m
	return true
}

func (s *blockingSink) Cancelled(*Consumer) {}

func TestSharedObserveNeverBlocks(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	a := n.start(t, "a", 1)
	sk := &blockingSink{entered: make(chan struct{}), release: make(chan struct{}), msgs: make(chan Message, 10)}
	require.NoError(t, a.Consume(ctx, &Consumer{Tag: "c", Owner: owner, Receiver: sk}))
	publish(t, a, "first")
	<-sk.entered // the actor is stuck in Deliver

	// The store's apply goroutine keeps calling Observe: none of these may
	// wait for the actor. Each kind is covered, with net effect nil: other
	// queues and shards, a cursor and tail no higher than the real ones,
	// and requeue/take pairs ending in a take.
	for i := range 100_000 {
		off := uint64(1000 + i%500)
		a.Observe(meta.Change{Kind: meta.ChangeAppended, Shard: "/other", Offset: uint64(i)})
		a.Observe(meta.Change{Kind: meta.ChangeCursor, VHost: "/", Queue: "other", Offset: uint64(i)})
		a.Observe(meta.Change{Kind: meta.ChangeTopology, VHost: "/"})
		a.Observe(meta.Change{Kind: meta.ChangeAppended, Shard: "/q", Offset: 1})
		a.Observe(meta.Change{Kind: meta.ChangeCursor, VHost: "/", Queue: "q", Offset: 1})
		a.Observe(meta.Change{Kind: meta.ChangeReturned, VHost: "/", Queue: "q", Offset: off, DeliveryCount: 1})
		a.Observe(meta.Change{Kind: meta.ChangeTaken, VHost: "/", Queue: "q", Offset: off})
	}
	close(sk.release)
	m := <-sk.msgs
	require.Equal(t, "first", string(m.Body))
	st, err := a.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Unacked: 1, Consumers: 1}, st)
	publish(t, a, "second")
	m2 := <-sk.msgs
	require.Equal(t, "second", string(m2.Body))
}

// TestSharedPurge: a purge on A takes what A sees as ready; B catches up
// through the changes and serves only what came after.
func TestSharedPurge(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	a, b := n.start(t, "a", 1), n.start(t, "b", 1)
	publish(t, a, bodies(5)...)
	waitReady(t, b, 5)
	m := mustGet(t, b)
	require.NoError(t, b.Settle(Requeue, m.Ref)) // one in the shared pool
	waitReady(t, a, 5)
	purged, err := a.Purge(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, purged)
	waitReady(t, b, 0)
	publish(t, b, "new")
	waitReady(t, a, 1)
	got, _, ok, err := a.Get(ctx, owner, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "new", string(got.Body))
	require.Empty(t, n.entries(t))
}

// startWith starts broker's actor on the shared queue with x-arguments
// args, clock c and dead-letter target dlq (nil: none).
func (n *nodes) startWith(t *testing.T, broker string, args amqp.Table, c clock.Clock, dlq *Queue) *Queue {
	t.Helper()
	a, err := ParseArgs(args)
	require.NoError(t, err)
	cfg := Config{
		VHost: "/", Name: "q", Shard: "/q", Stores: n.stores(),
		Broker: broker, Incarnation: 1, Shared: true, Clock: c, Features: Features{Args: a},
	}
	if dlq != nil {
		cfg.Features.DeadLetter = func(string, string, []byte) []*Queue { return []*Queue{dlq} }
	}
	q, err := Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	n.mu.Lock()
	n.qs[broker] = q
	n.mu.Unlock()
	return q
}

// TestSharedPriorities: a priority queue's promote puts the records in
// the shared pool, and each broker serves the pool by priority.
func TestSharedPriorities(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	args := amqp.Table{"x-max-priority": int32(10)}
	a, b := n.startWith(t, "a", args, nil, nil), n.startWith(t, "b", args, nil, nil)
	for _, m := range []struct {
		body string
		prio uint8
	}{{"l1", 1}, {"l2", 1}, {"h", 5}} {
		require.NoError(t, a.Publish(storage.Record{Body: []byte(m.body), Priority: m.prio}, NoTTL, nil, 0))
	}
	waitReady(t, b, 3)
	for _, x := range []struct {
		q    *Queue
		want string
	}{{b, "h"}, {a, "l1"}, {b, "l2"}} {
		m, _, ok, err := x.q.Get(ctx, owner, true)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, x.want, string(m.Body))
		require.False(t, m.Redelivered)
	}
	for _, q := range []*Queue{a, b} {
		_, _, ok, err := q.Get(ctx, owner, true)
		require.NoError(t, err)
		require.False(t, ok)
	}
	require.Empty(t, n.entries(t))
}

// TestSharedTTLExpiresOnce: both brokers' TTL timers fire for the same
// heads; the claims let exactly one of them dead-letter each message.
func TestSharedTTLExpiresOnce(t *testing.T) {
	fake := clock.NewFake(time.Unix(100, 0))
	n := newNodes(t)
	dlq := startNamed(t, "dlq")
	args := amqp.Table{"x-message-ttl": int32(50), "x-dead-letter-exchange": ""}
	a := n.startWith(t, "a", args, fake, dlq)
	b := n.startWith(t, "b", args, fake, dlq)
	const total = 300
	publish(t, a, bodies(total)...)
	waitReady(t, a, total)
	waitReady(t, b, total)
	fake.Advance(51 * time.Millisecond)
	waitReady(t, dlq, total)
	waitReady(t, a, 0)
	waitReady(t, b, 0)
	st, err := dlq.Stats(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, total, st.Ready, "each message dead-lettered once")
	// The sources delete their records and entries once the copies'
	// confirms reach them, asynchronously.
	deadline := time.Now().Add(5 * time.Second)
	for len(n.entries(t)) > 0 {
		require.False(t, time.Now().After(deadline), "entries left: %v", n.entries(t))
		time.Sleep(time.Millisecond)
	}
}

// TestSharedResetReloads: after ChangeReset (a snapshot replaced the
// replica) the actor reads cursor, tail and pool from the store again,
// including writes it never saw a change for.
func TestSharedResetReloads(t *testing.T) {
	ctx := context.Background()
	n := newNodes(t)
	a, b := n.start(t, "a", 1), n.start(t, "b", 1)
	publish(t, a, bodies(3)...)
	waitReady(t, b, 3)
	m := mustGet(t, a)
	waitReady(t, b, 2)

	// Behind the feed's back: two appends and A's delivery returned.
	_, err := n.s.Shards.Store.Append(ctx, "/q", []storage.Record{{Body: []byte("x")}, {Body: []byte("y")}})
	require.NoError(t, err)
	e, err := n.s.Index.MemoryIndex.Get(ctx, unacked.Key{VHost: "/", Queue: "q", Offset: m.Offset})
	require.NoError(t, err)
	e.State = unacked.Returned
	require.NoError(t, n.s.Index.MemoryIndex.Put(ctx, []unacked.Entry{e}))
	st, err := b.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Ready, "B saw none of it")

	b.Observe(meta.Change{Kind: meta.ChangeReset})
	st, err = b.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, st.Ready)
	got, _, ok, err := b.Get(ctx, owner, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, string(m.Body), string(got.Body))
	require.True(t, got.Redelivered)
}

func TestObserveIgnoredWhenNotShared(t *testing.T) {
	q := start(t, newStores())
	q.Observe(meta.Change{Kind: meta.ChangeAppended, Shard: "/q", Offset: 10})
	q.Observe(meta.Change{Kind: meta.ChangeReset})
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	require.Equal(t, Stats{}, st)
}

// mustGet takes one message from q with basic.get (manual ack); the queue
// must have one.
func mustGet(t *testing.T, q *Queue) Message {
	t.Helper()
	m, _, ok, err := q.Get(context.Background(), owner, false)
	require.NoError(t, err)
	require.True(t, ok)
	return m
}
