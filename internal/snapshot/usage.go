package snapshot

import (
	"context"

	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
)

// Usage is q's counts and memory: asked of its actor when exact is set,
// sampled otherwise (SampledUsage); false when q is gone or did not
// answer within ctx.
func Usage(ctx context.Context, q *vhost.Queue, exact bool) (queue.Usage, bool) {
	if !exact {
		return SampledUsage(ctx, q)
	}
	u, err := q.Usage(ctx)
	return u, err == nil
}

// SampledUsage is q's counts and memory without starting its actor, for
// the management API and metrics scrapes. An idle queue's are what it
// published (queue.Sampled): its counts after its last step and its
// memory from when it went idle, which is its state, since nothing ran
// since (in shared mode another broker's change shows once the actor,
// kicked by it, applied it). A queue whose actor runs is asked, as its
// memory moves with every step: that starts no goroutine, and those are
// the busy queues, not the many idle ones. false when the running queue
// is gone or did not answer.
func SampledUsage(ctx context.Context, q *vhost.Queue) (queue.Usage, bool) {
	u, running := q.Sampled()
	if !running {
		return u, true
	}
	u, err := q.Usage(ctx)
	return u, err == nil
}
