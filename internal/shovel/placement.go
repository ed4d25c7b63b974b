package shovel

import (
	"context"

	"github.com/warrenmq/broker/internal/linkloop"
)

// Placer runs a named link on exactly one of the brokers that share one
// store (linkloop.Placer).
type Placer = linkloop.Placer

// PlaceWith makes the supervisor run each link through p, so that of the
// brokers sharing a store exactly one runs it; Status then lists only the
// links running here. Call it before Start.
func (s *Supervisor) PlaceWith(p Placer) { s.placer = p }

// runLink runs l's worker until ctx ends or the link finishes: directly,
// or, placed, a fresh Worker each time this broker acquires the link (a
// link that moved here starts as RabbitMQ's shovel does on another node:
// src-delete-after queue-length counts the queue as it is then).
func (s *Supervisor) runLink(ctx context.Context, k linkKey, l *link) error {
	here := func(yes bool) {
		s.mu.Lock()
		if yes {
			l.w = NewWorker(l.def, s.local)
		}
		l.away = !yes
		s.mu.Unlock()
	}
	return linkloop.Placed(ctx, s.placer, Component+"/"+k.vhost+"/"+k.name, here, func(hctx context.Context) error {
		s.mu.Lock()
		w := l.w
		s.mu.Unlock()
		return w.Run(hctx)
	})
}
