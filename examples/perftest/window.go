package main

import "sync"

// window bounds how much is outstanding: messages published but not yet
// consumed (so a fast publisher cannot bury the consumer), or published but
// not yet confirmed (the confirm window). The publisher acquires, the
// consumer or confirm listener releases; close wakes a blocked publisher
// when the run ends. Safe for concurrent use.
type window struct {
	mu     sync.Mutex
	cond   sync.Cond
	used   int
	limit  int
	closed bool
}

func newWindow(limit int) *window {
	w := &window{limit: limit}
	w.cond.L = &w.mu
	return w
}

// acquire takes n slots, waiting while the window is full. An empty window
// always grants, so n > limit cannot deadlock. It reports false once the
// window is closed.
func (w *window) acquire(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.closed && w.used > 0 && w.used+n > w.limit {
		w.cond.Wait()
	}
	if w.closed {
		return false
	}
	w.used += n
	return true
}

// release returns n slots. Releasing more than was taken (a duplicate
// delivery) leaves the window empty rather than negative; the verifier
// reports the duplicate.
func (w *window) release(n int) {
	w.mu.Lock()
	w.used = max(w.used-n, 0)
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *window) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}
