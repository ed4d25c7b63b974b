package broker

import (
	"context"
	"slices"
	"sync"

	"github.com/warrenmq/broker/internal/events"
)

// bindingWatch pokes the federation links of an exchange when one of its
// bindings is created or deleted: one subscription to the broker's
// binding.created and binding.deleted events (taken at the first Watch,
// ended by the hub's Close), dispatched by vhost and source exchange to
// the links' wake channels.
type bindingWatch struct {
	once sync.Once
	mu   sync.Mutex
	m    map[[2]string][]*chan<- struct{}
}

// watch registers wake for the bindings of exchange x of vhost.
func (w *bindingWatch) watch(hub *events.Hub, vhost, x string, wake chan<- struct{}) (cancel func()) {
	w.once.Do(func() {
		events.SubscribeFunc(context.Background(), hub, events.MaskOf(events.BindingCreated, events.BindingDeleted), w.told)
	})
	k, p := [2]string{vhost, x}, &wake
	w.mu.Lock()
	if w.m == nil {
		w.m = map[[2]string][]*chan<- struct{}{}
	}
	w.m[k] = append(w.m[k], p)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		l := w.m[k]
		if i := slices.Index(l, p); i >= 0 {
			l = slices.Delete(l, i, i+1)
		}
		if len(l) == 0 {
			delete(w.m, k)
		} else {
			w.m[k] = l
		}
	}
}

// told is the subscription's: it runs on the goroutine that changed the
// binding, so it only pokes.
func (w *bindingWatch) told(e events.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.m[[2]string{e.VHost, e.Exchange}] {
		select {
		case *p <- struct{}{}:
		default:
		}
	}
}

// Watch is federation.Host's: the bindings of an exchange through the
// binding events, a queue's demand through its actor's notices
// (queue.Queue.Notify). A queue that is not here yet is not watched: the
// link's re-read covers it.
func (h federationHost) Watch(vhost, name string, queue bool, wake chan<- struct{}) (cancel func()) {
	if !queue {
		return h.b.bindingWatch.watch(h.b.events, vhost, name, wake)
	}
	vh, ok := h.b.lookupVHost(vhost)
	if !ok {
		return func() {}
	}
	q, ok := vh.LookupQueue(name)
	if !ok {
		return func() {}
	}
	return q.Notify(wake)
}
