package shovel

import (
	"context"
	"encoding/json"

	"github.com/warrenmq/broker/internal/linkloop"
)

// Placer runs a named link on exactly one of the brokers that share one
// store (linkloop.Placer).
type Placer = linkloop.Placer

// PlaceWith makes the supervisor run each link through p, so that of the
// brokers sharing a store exactly one runs it; Status then lists the
// links running here, and those running elsewhere when p is a
// linkloop.Reporter. Call it before Start.
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
	report := func() []byte {
		s.mu.Lock()
		w, away := l.w, l.away
		s.mu.Unlock()
		if away { // acquiring it: the link starts afresh
			w = NewWorker(l.def, s.local)
		}
		b, _ := json.Marshal(w.Status())
		return b
	}
	return linkloop.Placed(ctx, s.placer, placementName(k), here, report, func(hctx context.Context) error {
		s.mu.Lock()
		w := l.w
		s.mu.Unlock()
		return w.Run(hctx)
	})
}

func placementName(k linkKey) string { return Component + "/" + k.vhost + "/" + k.name }

// reported is the status of k as the broker running it last stored it,
// and that broker; false when none is known.
func (s *Supervisor) reported(k linkKey) (Status, string, bool) {
	return linkloop.Reported[Status](s.placer, placementName(k))
}

func (s *Supervisor) isReported(k linkKey) bool { _, _, ok := s.reported(k); return ok }
