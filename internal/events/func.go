package events

import (
	"context"
	"sync"
	"time"
)

// SubscribeFunc calls fn with each event of the kinds in mask until ctx
// ends or the Hub closes, for the broker's own listeners (the federation
// links). fn runs on the goroutine that emits the event, during Emit: it
// must not block or take long, and must not call the Hub. Nothing is
// dropped and no goroutine is started; events from one source reach fn
// in the order they were emitted. After ctx ends fn may still run for
// an Emit already under way, never after the cancel's AfterFunc has
// unregistered it.
func SubscribeFunc(ctx context.Context, h *Hub, mask Mask, fn func(Event)) {
	s := &funcSubscription{kinds: mask & All, fn: fn}
	if ctx.Err() != nil || !h.add(s) {
		return
	}
	context.AfterFunc(ctx, func() { h.remove(s) })
}

// funcSubscription is one SubscribeFunc.
type funcSubscription struct {
	kinds Mask
	fn    func(Event)
	mu    sync.RWMutex // closed, against a call racing remove
	done  bool
}

func (s *funcSubscription) mask() Mask { return s.kinds }

func (s *funcSubscription) offer(e Event, _ time.Time) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.done {
		s.fn(e)
	}
}

func (s *funcSubscription) close() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}
