package shovel

import "context"

// Placer runs a named link on exactly one of the brokers that share one
// store (internal/placement's Lease): Run calls fn each time this broker
// acquires name, with a context that ends when it loses it, and returns
// when ctx ends or fn returns while still holding name.
type Placer interface {
	Run(ctx context.Context, name string, fn func(context.Context) error) error
}

// PlaceWith makes the supervisor run each link through p, so that of the
// brokers sharing a store exactly one runs it; Status then lists only the
// links running here. Call it before Start.
func (s *Supervisor) PlaceWith(p Placer) { s.placer = p }

// runLink runs l's worker until ctx ends or the link finishes: directly,
// or, placed, a fresh Worker each time this broker acquires the link (a
// link that moved here starts as RabbitMQ's shovel does on another node:
// src-delete-after queue-length counts the queue as it is then).
func (s *Supervisor) runLink(ctx context.Context, k linkKey, l *link) error {
	if s.placer == nil {
		return l.w.Run(ctx)
	}
	return s.placer.Run(ctx, Component+"/"+k.vhost+"/"+k.name, func(hctx context.Context) error {
		w := NewWorker(l.def, s.local)
		s.mu.Lock()
		l.w, l.away = w, false
		s.mu.Unlock()
		err := w.Run(hctx)
		s.mu.Lock()
		l.away = true
		s.mu.Unlock()
		return err
	})
}
