package queue

import "sync"

// The mailbox holds the ops callers send to the actor. It used to be a
// channel of maxMailbox ops, whose buffer every queue paid up front (1,024
// ops of 304 bytes: 311,296 bytes per queue, idle or not). It is now a
// list of fixed-size chunks taken from a pool shared by every queue: a
// queue holds chunks only while ops wait in its mailbox, so an idle queue
// holds none, and a busy one reuses the chunks the others gave back.
// Back-pressure is unchanged: a sender waits while maxMailbox ops wait.

// chunkOps is the number of ops in one chunk (about 10 KB).
const chunkOps = 32

type opChunk struct {
	ops  [chunkOps]op
	n    int
	next *opChunk
}

var chunkPool = sync.Pool{New: func() any { return new(opChunk) }}

// freeChunks returns a list of chunks to the pool, their ops cleared so
// the pool keeps no message alive.
func freeChunks(c *opChunk) {
	for c != nil {
		next := c.next
		clear(c.ops[:c.n])
		c.n, c.next = 0, nil
		chunkPool.Put(c)
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

// put appends o unless the mailbox is closed, waiting while it is full.
// first reports that the mailbox was empty: the actor must be kicked.
func (m *mailbox) put(o *op) (first, ok bool) {
	m.mu.Lock()
	for !m.closed && m.n >= maxMailbox {
		if m.room.L == nil {
			m.room.L = &m.mu
		}
		m.waiters++
		m.room.Wait()
		m.waiters--
	}
	if m.closed {
		m.mu.Unlock()
		return false, false
	}
	t := m.tail
	if t == nil || t.n == chunkOps {
		c := chunkPool.Get().(*opChunk)
		if t == nil {
			m.head = c
		} else {
			t.next = c
		}
		m.tail, t = c, c
	}
	t.ops[t.n] = *o
	t.n++
	m.n++
	first = m.n == 1
	m.mu.Unlock()
	return first, true
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
