package queue

import "sync/atomic"

// Credit bounds unacknowledged deliveries: basic.qos prefetch-count, either
// per consumer or (global=true) per channel. A zero limit means unlimited.
//
// Credit is shared between the queue actors that deliver (Acquire) and the
// channel that settles (Release), so it is lock-free.
type Credit struct {
	limit atomic.Int64
	used  atomic.Int64
}

// SetLimit changes the limit. Deliveries already out are not recalled: a lower
// limit only stops new ones until enough are settled (RabbitMQ's behaviour).
func (c *Credit) SetLimit(n uint16) { c.limit.Store(int64(n)) }

// Limit returns the current limit, 0 for unlimited.
func (c *Credit) Limit() uint16 { return uint16(c.limit.Load()) }

// Used returns the number of deliveries counted against the limit.
func (c *Credit) Used() int64 { return c.used.Load() }

// Acquire takes one unit if the limit allows it.
func (c *Credit) Acquire() bool {
	for {
		used := c.used.Load()
		if limit := c.limit.Load(); limit > 0 && used >= limit {
			return false
		}
		if c.used.CompareAndSwap(used, used+1) {
			return true
		}
	}
}

// Release returns n units.
func (c *Credit) Release(n int) {
	if n > 0 {
		c.used.Add(int64(-n))
	}
}
