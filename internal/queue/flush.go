package queue

// Flusher is implemented by Receivers that hold their deliveries back
// until the queue says a batch is complete: Flush runs on the queue's
// goroutine after the last Deliver of each batch (up to maxBatch messages,
// or a round of a stream's readers) to that receiver. A consumer's
// connection then wakes its writer once per batch and writes the batch
// with one write, instead of waking it for the first delivery and writing
// whatever arrived by the time it ran. A batch of one, a queue that is
// mostly idle, is flushed as soon as it is delivered.
type Flusher interface {
	Flush()
}

// noteFlush remembers that c's receiver got a delivery this batch.
func (q *Queue) noteFlush(c *Consumer) {
	if c.flushQueued {
		return
	}
	if _, ok := c.Receiver.(Flusher); ok {
		c.flushQueued = true
		q.scratch.flush = append(q.scratch.flush, c)
	}
}

// flushReceivers flushes every receiver noteFlush remembered.
func (q *Queue) flushReceivers() {
	for i, c := range q.scratch.flush {
		c.flushQueued = false
		c.Receiver.(Flusher).Flush()
		q.scratch.flush[i] = nil
	}
	q.scratch.flush = q.scratch.flush[:0]
}
