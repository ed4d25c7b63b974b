package queue

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/faultstore"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// The tests in this file break the stores at the points the write order
// must survive —
// after the index write but before the cursor CAS, during a requeue,
// between the two deletes of an ack — and check, after "reopening" (a new
// actor on the same stores, as after a crash), that nothing was lost. A
// message may come twice; where it does, the test says so.

// faulty wraps fresh in-memory stores with one Injector. inner are the same
// stores unwrapped: what a restarted process finds.
func faulty() (wrapped, inner Stores, in *faultstore.Injector) {
	inner = newStores()
	in = faultstore.New()
	wrapped = Stores{
		Shards:  faultstore.WrapShards(inner.Shards, in),
		Cursors: faultstore.WrapMeta(metaOf(inner), in),
		Index:   faultstore.WrapIndex(inner.Index, in),
	}
	return wrapped, inner, in
}

// waitFired waits for a rule to act.
func waitFired(t *testing.T, r *faultstore.Rule) {
	t.Helper()
	select {
	case <-r.Fired():
	case <-time.After(5 * time.Second):
		t.Fatal("the fault never fired")
	}
}

// drainGets takes every ready message with no-ack basic.gets and returns
// bodies and redelivered flags, in order.
func drainGets(t *testing.T, q *Queue) (bodies []string, redelivered []bool) {
	t.Helper()
	for {
		m, _, ok, err := q.Get(context.Background(), owner, true)
		require.NoError(t, err)
		if !ok {
			return bodies, redelivered
		}
		bodies = append(bodies, string(m.Body))
		redelivered = append(redelivered, m.Redelivered)
	}
}

// requireIndexEmpty requires the queue's index to hold no entry.
func requireIndexEmpty(t *testing.T, x unacked.Index) {
	t.Helper()
	var left []unacked.Entry
	require.NoError(t, x.Queue(context.Background(), "/", "q", func(e unacked.Entry) bool {
		left = append(left, e)
		return true
	}))
	require.Empty(t, left)
}

func TestCrashBetweenIndexWriteAndCursorCAS(t *testing.T) {
	ctx := context.Background()
	wrapped, inner, in := faulty()
	q := start(t, wrapped)
	publish(t, q, "a", "b", "c", "d")
	// The first claim of a consumer crashes at its CAS.
	crash := in.CrashAt(faultstore.On(faultstore.CompareAndSwapOffset))
	s := newSink()
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "x", Owner: owner, Receiver: s}))
	waitFired(t, crash)
	q.Stop()
	require.Empty(t, s.msgs, "nothing is delivered before the cursor moved")

	// The order of writes: the claim's index entries went in before the
	// CAS was attempted.
	var ops []faultstore.Op
	for _, c := range in.Trace() {
		if c.Op == faultstore.IndexPut || c.Op == faultstore.CompareAndSwapOffset {
			ops = append(ops, c.Op)
		}
	}
	require.Equal(t, []faultstore.Op{faultstore.IndexPut, faultstore.CompareAndSwapOffset}, ops)

	// Restart: the entries beyond the cursor never committed, so the
	// messages are simply ready again, first delivery, in order.
	q2 := start(t, inner)
	bodies, redelivered := drainGets(t, q2)
	require.Equal(t, []string{"a", "b", "c", "d"}, bodies)
	require.Equal(t, []bool{false, false, false, false}, redelivered)
	requireIndexEmpty(t, inner.Index)
}

// A crash at a later claim leaves earlier deliveries unacked: they come
// back first, redelivered — the duplicate the design allows.
func TestCrashAtLaterClaimRedeliversEarlierOnes(t *testing.T) {
	ctx := context.Background()
	wrapped, inner, in := faulty()
	q := start(t, wrapped)
	publish(t, q, "a", "b", "c", "d")
	m, _, ok, err := q.Get(ctx, owner, false) // a: delivered, never acked
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "a", string(m.Body))
	crash := in.CrashAt(faultstore.On(faultstore.CompareAndSwapOffset))
	_, _, _, err = q.Get(ctx, owner, false) // b's claim dies at the CAS
	require.ErrorIs(t, err, faultstore.ErrCrashed)
	waitFired(t, crash)
	q.Stop()

	q2 := start(t, inner)
	bodies, redelivered := drainGets(t, q2)
	require.Equal(t, []string{"a", "b", "c", "d"}, bodies)
	require.Equal(t, []bool{true, false, false, false}, redelivered, "a is a duplicate delivery, flagged as one")
	requireIndexEmpty(t, inner.Index)
}

func TestCrashBetweenTheTwoAckDeletes(t *testing.T) {
	ctx := context.Background()
	wrapped, inner, in := faulty()
	q := start(t, wrapped)
	publish(t, q, "a", "b", "c")
	var refs []Ref
	for range 3 {
		m, _, ok, err := q.Get(ctx, owner, false)
		require.NoError(t, err)
		require.True(t, ok)
		refs = append(refs, m.Ref)
	}
	crash := in.CrashAt(faultstore.On(faultstore.IndexDelete))
	require.NoError(t, q.Settle(Ack, refs[1:2]...)) // b: record deleted, entry not
	waitFired(t, crash)
	q.Stop()
	e, err := inner.Index.Get(ctx, unacked.Key{VHost: "/", Queue: "q", Offset: refs[1].Offset})
	require.NoError(t, err, "the crash left b's entry behind")
	require.Equal(t, unacked.Delivered, e.State)

	q2 := start(t, inner)
	bodies, redelivered := drainGets(t, q2)
	require.Equal(t, []string{"a", "c"}, bodies, "b was acked: gone")
	require.Equal(t, []bool{true, true}, redelivered)
	requireIndexEmpty(t, inner.Index)
}

// A crash at the first delete of an ack: the ack never happened, so the
// message comes back — a duplicate of what the client already processed.
func TestCrashAtFirstAckDeleteRedelivers(t *testing.T) {
	ctx := context.Background()
	wrapped, inner, in := faulty()
	q := start(t, wrapped)
	publish(t, q, "a", "b")
	m, _, _, err := q.Get(ctx, owner, false)
	require.NoError(t, err)
	crash := in.CrashAt(faultstore.On(faultstore.DeleteByOffsets))
	require.NoError(t, q.Settle(Ack, m.Ref))
	waitFired(t, crash)
	q.Stop()

	q2 := start(t, inner)
	bodies, redelivered := drainGets(t, q2)
	require.Equal(t, []string{"a", "b"}, bodies)
	require.Equal(t, []bool{true, false}, redelivered, "a comes again, flagged redelivered")
}

func TestCrashDuringRequeueKeepsPosition(t *testing.T) {
	ctx := context.Background()
	wrapped, inner, in := faulty()
	q := start(t, wrapped)
	publish(t, q, "a", "b", "c", "d", "e")
	var refs []Ref
	for range 3 {
		m, _, _, err := q.Get(ctx, owner, false)
		require.NoError(t, err)
		refs = append(refs, m.Ref)
	}
	require.NoError(t, q.Settle(Ack, refs[:1]...)) // a is done
	crash := in.CrashAt(faultstore.PutState(unacked.Returned))
	require.NoError(t, q.Settle(Requeue, refs[1:2]...)) // b's requeue dies
	waitFired(t, crash)
	q.Stop()

	q2 := start(t, inner)
	bodies, redelivered := drainGets(t, q2)
	require.Equal(t, []string{"b", "c", "d", "e"}, bodies, "b and c in their original positions, ahead of the rest")
	require.Equal(t, []bool{true, true, false, false}, redelivered)
	requireIndexEmpty(t, inner.Index)
}

// A requeue whose index write fails is retried by the actor; the message
// is then served again from its original position.
func TestFailedRequeueIsRetriedInPlace(t *testing.T) {
	ctx := context.Background()
	wrapped, _, in := faulty()
	q := start(t, wrapped)
	publish(t, q, "a", "b", "c")
	a, _, _, err := q.Get(ctx, owner, false)
	require.NoError(t, err)
	rule := in.Fail(faultstore.PutState(unacked.Returned), 2, nil) // fails twice
	require.NoError(t, q.Settle(Requeue, a.Ref))
	waitFired(t, rule)
	// Until the write succeeds the message is out, owned by the queue;
	// then it is ready again.
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Ready == 3 && st.Unacked == 0
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, 3, in.Count(faultstore.IndexPut)-1, "one claim, two failed requeues, one that worked")
	bodies, redelivered := drainGets(t, q)
	require.Equal(t, []string{"a", "b", "c"}, bodies)
	require.Equal(t, []bool{true, false, false}, redelivered)
	// The requeue's late ack does nothing: the first settle won.
	require.NoError(t, q.Settle(Ack, a.Ref))
}

// An ack whose record delete fails is retried; one whose index delete
// fails leaves no Delivered entry behind once the store recovers.
func TestFailedAckDeletesAreRetried(t *testing.T) {
	acks := map[string]func(q *Queue, r Ref) error{
		"Ack":    func(q *Queue, r Ref) error { return q.Settle(Ack, r) },
		"AckGot": (*Queue).AckGot, // settled in place: the actor must still retry
	}
	for _, op := range []faultstore.Op{faultstore.DeleteByOffsets, faultstore.IndexDelete} {
		for name, ack := range acks {
			t.Run(string(op)+"/"+name, func(t *testing.T) {
				testFailedAckDeleteIsRetried(t, op, ack)
			})
		}
	}
}

func testFailedAckDeleteIsRetried(t *testing.T, op faultstore.Op, ack func(*Queue, Ref) error) {
	ctx := context.Background()
	wrapped, inner, in := faulty()
	q := start(t, wrapped)
	publish(t, q, "a", "b")
	a, _, _, err := q.Get(ctx, owner, false)
	require.NoError(t, err)
	rule := in.Fail(faultstore.On(op), 1, nil)
	require.NoError(t, ack(q, a.Ref))
	waitFired(t, rule)
	require.Eventually(t, func() bool {
		n, err := inner.Shards.Count(ctx, "/q")
		if err != nil || n != 1 {
			return false
		}
		_, err = inner.Index.Get(ctx, unacked.Key{VHost: "/", Queue: "q", Offset: a.Offset})
		return err != nil
	}, 5*time.Second, time.Millisecond)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Ready: 1}, st)
	q.Stop()
	q2 := start(t, inner)
	bodies, _ := drainGets(t, q2)
	require.Equal(t, []string{"b"}, bodies)
}

// A claim whose index write fails delivers nothing; the actor retries and
// the consumer gets every message once, in order.
func TestFailedClaimIsRetried(t *testing.T) {
	ctx := context.Background()
	for _, op := range []faultstore.Op{faultstore.IndexPut, faultstore.CompareAndSwapOffset, faultstore.Read} {
		t.Run(string(op), func(t *testing.T) {
			wrapped, inner, in := faulty()
			q := start(t, wrapped)
			publish(t, q, "a", "b", "c")
			// Force reads from the store: a fresh actor holds nothing.
			q.Stop()
			q = start(t, wrapped)
			rule := in.Fail(faultstore.On(op), 1, nil)
			s := newSink()
			require.NoError(t, q.Consume(ctx, &Consumer{Tag: "x", Owner: owner, Receiver: s}))
			waitFired(t, rule)
			var got []string
			for range 3 {
				m := s.next(t)
				require.False(t, m.Redelivered)
				got = append(got, string(m.Body))
				require.NoError(t, q.Settle(Ack, m.Ref))
			}
			require.Equal(t, []string{"a", "b", "c"}, got)
			st, err := q.Stats(ctx)
			require.NoError(t, err)
			require.Equal(t, Stats{Consumers: 1}, st)
			requireIndexEmpty(t, inner.Index)
		})
	}
}

// A failed Append confirms with an error (the channel answers basic.nack),
// and the queue goes on: later publishes are stored and confirmed.
func TestFailedAppendConfirmsWithError(t *testing.T) {
	ctx := context.Background()
	wrapped, _, in := faulty()
	q := start(t, wrapped)
	in.Fail(faultstore.On(faultstore.Append), 1, nil)
	var c errConfirms
	require.NoError(t, q.Publish(recordOf("lost"), NoTTL, &c, 1))
	_, err := q.Stats(ctx) // the publish was flushed
	require.NoError(t, err)
	require.NoError(t, q.Publish(recordOf("kept"), NoTTL, &c, 2))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{Ready: 1}, st)
	require.Equal(t, map[uint64]bool{1: false, 2: true}, c.results())
	bodies, _ := drainGets(t, q)
	require.Equal(t, []string{"kept"}, bodies)
}

// metaOf returns the meta.Store behind newStores' cursors.
func metaOf(s Stores) meta.Store { return s.Cursors.(meta.Store) }

func recordOf(body string) storage.Record {
	return storage.Record{Body: []byte(body), Persistent: true}
}

// errConfirms records each sequence number's outcome: true for stored.
type errConfirms struct {
	mu  sync.Mutex
	got map[uint64]bool
}

func (c *errConfirms) Confirm(seqs []uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		c.got = make(map[uint64]bool)
	}
	for _, s := range seqs {
		c.got[s] = err == nil
	}
}

func (c *errConfirms) results() map[uint64]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.got)
}
