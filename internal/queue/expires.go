package queue

import "context"

// Queue expiry (x-expires): when the queue was last used, the timer, and
// the check the vhost confirms with before deleting it.

// used records that the queue was used now (x-expires) and re-arms the
// expiry timer while it has no consumer.
func (q *Queue) used() {
	exp := q.cfg.Features.Args.Expires
	if exp <= 0 {
		return
	}
	q.feat.lastUsed = q.cfg.Clock.Now()
	if q.feat.expiresTimer != nil {
		q.feat.expiresTimer.Stop()
		q.feat.expiresTimer = nil
	}
	if q.consumers.len() > 0 || q.cfg.Features.Expired == nil {
		return
	}
	q.feat.expiresTimer = q.cfg.Clock.AfterFunc(exp, q.cfg.Features.Expired)
}

func (q *Queue) unused() bool {
	exp := q.cfg.Features.Args.Expires
	return exp > 0 && q.consumers.len() == 0 && !q.cfg.Clock.Now().Before(q.feat.lastUsed.Add(exp))
}

// Touch tells the queue it was used (a redeclaration), for x-expires.
func (q *Queue) Touch() { q.post(op{kind: opTouch}) }

// Unused reports whether the queue has had no consumer and no use for its
// x-expires period; the vhost deletes it then.
func (q *Queue) Unused(ctx context.Context) bool {
	r, err := q.call(ctx, op{kind: opUnused})
	return err == nil && r.ok
}
