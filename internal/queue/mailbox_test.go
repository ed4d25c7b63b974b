package queue

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// mailboxState reads the mailbox's counts under its lock.
func mailboxState(q *Queue) (ops, waiters int, empty bool) {
	q.mbox.mu.Lock()
	defer q.mbox.mu.Unlock()
	return q.mbox.n, q.mbox.waiters, q.mbox.head == nil
}

// waitFor polls cond; the deadline only turns a hang into a failure.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		require.False(t, time.Now().After(deadline), "waiting for %s", what)
		time.Sleep(time.Millisecond)
	}
}

// blockedQueue returns a queue whose actor is stuck in a transient
// Append until the returned function lets it go.
func blockedQueue(t *testing.T) (*Queue, func()) {
	t.Helper()
	q, shards := startSyncing(t)
	require.NoError(t, q.Publish(storage.Record{Body: []byte("first")}, NoTTL, nil, 0))
	<-shards.entered
	return q, shards.openGate
}

// A full mailbox holds senders back (the publishers' back-pressure) and
// lets them in, in order, as soon as the actor takes what waits.
func TestMailboxHoldsSendersWhileFull(t *testing.T) {
	q, release := blockedQueue(t)
	var log confirmLog
	sent := make(chan error, 1)
	go func() {
		for i := uint64(1); i <= maxMailbox+1; i++ {
			if err := q.Publish(storage.Record{Body: []byte("x")}, NoTTL, &log, i); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	waitFor(t, "a full mailbox and a waiting sender", func() bool {
		n, waiters, _ := mailboxState(q)
		return n == maxMailbox && waiters == 1
	})
	release()
	require.NoError(t, <-sent)
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, maxMailbox+2, st.Ready)
	seqs := log.got()
	require.Len(t, seqs, maxMailbox+1)
	for i, s := range seqs {
		require.EqualValues(t, i+1, s)
	}
	_, _, empty := mailboxState(q)
	require.True(t, empty, "the handled ops' chunks went back to the pool")
}

// A sender waiting for room when the queue stops is refused, not left
// hanging, and every op the mailbox took is still handled.
func TestMailboxRefusesWaitingSendersAtStop(t *testing.T) {
	q, release := blockedQueue(t)
	var log confirmLog
	accepted := make(chan int, 1)
	go func() {
		for i := uint64(1); ; i++ {
			if err := q.Publish(storage.Record{Body: []byte("x")}, NoTTL, &log, i); err != nil {
				require.ErrorIs(t, err, ErrDeleted)
				accepted <- int(i - 1)
				return
			}
		}
	}()
	waitFor(t, "a waiting sender", func() bool {
		_, waiters, _ := mailboxState(q)
		return waiters == 1
	})
	stopped := make(chan struct{})
	go func() { q.Stop(); close(stopped) }()
	release()
	n := <-accepted
	<-stopped
	require.GreaterOrEqual(t, n, maxMailbox)
	require.Len(t, log.got(), n, "every publish the mailbox took was stored and confirmed")
}

// A mailbox that holds one op holds a small chunk, not a full one: 10,000
// queues sent one message each at once held 10 KB each until their actors
// ran. More ops go on in full chunks, in order.
func TestMailboxGrowsWithItsOps(t *testing.T) {
	var m mailbox
	first, ok := m.put(&op{seq: 0}, true)
	require.True(t, first)
	require.True(t, ok)
	held := int(unsafe.Sizeof(op{})) * len(m.head.ops)
	require.LessOrEqual(t, held, 1024, "bytes held for one waiting op")

	const n = 3*chunkOps + 5
	for i := uint64(1); i < n; i++ {
		first, ok := m.put(&op{seq: i}, true)
		require.False(t, first)
		require.True(t, ok)
	}
	chunks := m.take(false)
	var seqs []uint64
	for c := chunks; c != nil; c = c.next {
		for i := range c.n {
			seqs = append(seqs, c.ops[i].seq)
		}
	}
	freeChunks(chunks)
	require.Len(t, seqs, n)
	for i, s := range seqs {
		require.EqualValues(t, i, s)
	}
	first, _ = m.put(&op{}, true)
	require.True(t, first, "an emptied mailbox starts small again")
	require.LessOrEqual(t, int(unsafe.Sizeof(op{}))*len(m.head.ops), 1024)
}

// A put that does not wait goes into a full mailbox, behind what waits
// there: SetArgs keeps its place among the publishes without waiting on
// the actor.
func TestMailboxPutWithoutWaitPassesAFullMailbox(t *testing.T) {
	var m mailbox
	for i := range uint64(maxMailbox) {
		_, ok := m.put(&op{seq: i}, true)
		require.True(t, ok)
	}
	_, ok := m.put(&op{seq: maxMailbox}, false)
	require.True(t, ok)
	chunks := m.take(true)
	var last uint64
	n := 0
	for c := chunks; c != nil; c = c.next {
		for i := range c.n {
			last = c.ops[i].seq
			n++
		}
	}
	freeChunks(chunks)
	require.Equal(t, maxMailbox+1, n)
	require.EqualValues(t, maxMailbox, last, "the op put without waiting came last")
	_, ok = m.put(&op{}, false)
	require.False(t, ok, "a closed mailbox refuses it")
}
