package queue

import (
	"slices"
	"sync"
	"sync/atomic"
)

// notices are the watchers of a queue's demand (Notify). The actor's
// hook (publishCounts, at the end of every step) costs one atomic load
// while nobody watches, and with watchers a comparison of the counts the
// step leaves with those it replaces: a watcher is poked when they
// differ in what a demand reader looks at, never once per message of a
// step.
type notices struct {
	list atomic.Pointer[[]*notice] // replaced under mu, never changed in place
	mu   sync.Mutex
}

type notice struct{ ch chan<- struct{} }

// Notify makes the queue poke ch whenever a step changes its consumer
// count, empties it or makes it non-empty: what a reader of Counts
// deciding whether the queue wants messages (empty, with consumers)
// looks at. A poke never waits: one already pending in ch absorbs the
// next, so give ch a buffer of 1 and read Counts after each receive.
// cancel stops the pokes; after it returns none is sent. A stopped queue
// (deleted, or its broker closing) takes no step, so it pokes no more.
func (q *Queue) Notify(ch chan<- struct{}) (cancel func()) {
	n := &notice{ch: ch}
	q.notices.mu.Lock()
	var l []*notice
	if old := q.notices.list.Load(); old != nil {
		l = slices.Clone(*old)
	}
	l = append(l, n)
	q.notices.list.Store(&l)
	q.notices.mu.Unlock()
	return func() {
		q.notices.mu.Lock()
		defer q.notices.mu.Unlock()
		old := q.notices.list.Load()
		if old == nil {
			return
		}
		i := slices.Index(*old, n)
		if i < 0 {
			return
		}
		l := slices.Delete(slices.Clone(*old), i, i+1)
		if len(l) == 0 {
			q.notices.list.Store(nil)
			return
		}
		q.notices.list.Store(&l)
	}
}

// demandChanged is publishCounts' hook, before it stores st: whether
// there are watchers and st differs from the counts it replaces in what
// they look at.
func (q *Queue) demandChanged(st Stats) bool {
	if q.notices.list.Load() == nil {
		return false
	}
	return int64(st.Consumers) != q.counts.consumers.Load() || (st.Ready == 0) != (q.counts.ready.Load() == 0)
}

// poke pokes every watcher, once publishCounts stored the new counts.
func (q *Queue) poke() {
	q.notices.mu.Lock() // against a cancel returning while a poke is under way
	defer q.notices.mu.Unlock()
	l := q.notices.list.Load()
	if l == nil {
		return
	}
	for _, n := range *l {
		select {
		case n.ch <- struct{}{}:
		default:
		}
	}
}
