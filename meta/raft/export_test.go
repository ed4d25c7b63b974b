package raft

// QueueStats reports, for the tests, the most bytes ever queued for peer
// to and how many messages to it were dropped.
func (n *Node) QueueStats(to uint64) (highBytes, drops int) {
	n.queues.Lock()
	q := n.queues.m[to]
	n.queues.Unlock()
	if q == nil {
		return 0, 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.highBytes, q.drops
}

// MaxQueueBytes is the byte limit of a peer's queue.
const MaxQueueBytes = maxQueueBytes
