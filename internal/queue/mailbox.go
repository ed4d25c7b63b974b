package queue

import "sync"

// The mailbox holds the ops callers send to the actor. It used to be a
// channel of maxMailbox ops, whose buffer every queue paid up front (1,024
// ops of 304 bytes: 311,296 bytes per queue, idle or not). It is now a
// list of chunks taken from pools shared by every queue: a queue holds
// chunks only while ops wait in its mailbox, so an idle queue holds none,
// one that is sent an op now and then a small one, and a busy one reuses
// the full-size chunks the others gave back.
// Back-pressure is unchanged: a sender waits while maxMailbox ops wait.

// chunkOps is the number of ops in a full-size chunk (about 10 KB), and
// firstChunkOps in the first chunk of a mailbox that was empty: most
// mailboxes hold one op or two at a time (a publish to a queue that is
// mostly idle), and 10,000 queues each given one message at once held a
// full chunk each (100 MB) until their actors ran. A mailbox that fills
// its small chunk goes on with full ones.
const (
	chunkOps      = 32
	firstChunkOps = 2
)

// opChunk is the head of a smallChunk or a fullChunk: ops is the array
// that follows it.
type opChunk struct {
	ops  []op
	n    int
	next *opChunk
}

type smallChunk struct {
	opChunk
	arr [firstChunkOps]op
}

type fullChunk struct {
	opChunk
	arr [chunkOps]op
}

var (
	smallChunks = sync.Pool{New: func() any {
		c := new(smallChunk)
		c.ops = c.arr[:]
		return &c.opChunk
	}}
	fullChunks = sync.Pool{New: func() any {
		c := new(fullChunk)
		c.ops = c.arr[:]
		return &c.opChunk
	}}
)

// freeChunks returns a list of chunks to their pools, their ops cleared
// so the pools keep no message alive.
func freeChunks(c *opChunk) {
	for c != nil {
		next := c.next
		clear(c.ops[:c.n])
		c.n, c.next = 0, nil
		if len(c.ops) == chunkOps {
			fullChunks.Put(c)
		} else {
			smallChunks.Put(c)
		}
		c = next
	}
}

type mailbox struct {
	mu         sync.Mutex
	room       sync.Cond // senders waiting while the mailbox is full
	head, tail *opChunk
	n          int // ops in the chunks
	waiters    int
	closed     bool
}

// put appends o unless the mailbox is closed, waiting while it is full
// when wait is set. first reports that the mailbox was empty: the actor
// must be kicked. A put that does not wait (SetArgs) may take the mailbox
// past maxMailbox by the one op it adds.
func (m *mailbox) put(o *op, wait bool) (first, ok bool) {
	if !m.lockRoom(wait) {
		return false, false
	}
	*m.slot(1) = *o
	first = m.n == 1
	m.mu.Unlock()
	return first, true
}

// putEach appends n ops, set filling each in place, under one lock:
// PublishBatch's hand-off. It waits while the mailbox is full, then adds
// all n, which may take it past maxMailbox by n. first and ok are put's.
func (m *mailbox) putEach(n int, set func(i int, o *op)) (first, ok bool) {
	if !m.lockRoom(true) {
		return false, false
	}
	first = m.n == 0
	for i := range n {
		set(i, m.slot(n-i))
	}
	m.mu.Unlock()
	return first, true
}

// lockRoom locks the mailbox, waiting first while it is full when wait is
// set. It reports false, with the lock released, when the mailbox is
// closed.
func (m *mailbox) lockRoom(wait bool) bool {
	m.mu.Lock()
	for wait && !m.closed && m.n >= maxMailbox {
		if m.room.L == nil {
			m.room.L = &m.mu
		}
		m.waiters++
		m.room.Wait()
		m.waiters--
	}
	if m.closed {
		m.mu.Unlock()
		return false
	}
	return true
}

// slot returns the next free op of the locked mailbox, counted in, taking
// a chunk when the tail is full. left is how many ops the caller is about
// to add: a mailbox that was empty starts with a small chunk unless more
// than fit in one are coming.
func (m *mailbox) slot(left int) *op {
	t := m.tail
	if t == nil {
		if left > firstChunkOps {
			t = fullChunks.Get().(*opChunk)
		} else {
			t = smallChunks.Get().(*opChunk)
		}
		m.head, m.tail = t, t
	} else if t.n == len(t.ops) {
		c := fullChunks.Get().(*opChunk)
		t.next = c
		m.tail, t = c, c
	}
	o := &t.ops[t.n]
	t.n++
	m.n++
	return o
}

// take removes every op in the mailbox and wakes the senders waiting for
// room; close also refuses every later put. The caller hands the chunks
// back with freeChunks once it has handled them.
func (m *mailbox) take(close bool) *opChunk {
	m.mu.Lock()
	c := m.head
	m.head, m.tail, m.n = nil, nil, 0
	if close {
		m.closed = true
	}
	if m.waiters > 0 {
		m.room.Broadcast()
	}
	m.mu.Unlock()
	return c
}
