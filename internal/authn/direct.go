package authn

import (
	"context"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/session"
)

// Stored reads user's stored permissions on the vhost named vh into the
// Access the user's connections there share (the broker's
// access.Registry.Stored over its store): the Access, or the refusal an
// AMQP client would get at connection.open, or the error of a store that
// did not answer.
type Stored func(ctx context.Context, user, vh string) (a *session.Access, refusal *amqp.Error, unavailable error)

// DirectAccess is the Access of a direct Channel opened as user on the
// vhost named vh, or the *amqp.Error an AMQP client would get at
// connection.open (ctx's error once ctx ended). Without a chain the user
// must exist (RabbitMQ's direct connections authenticate the user without
// a password) and stored decides. With one, the chain is asked to log
// user in with auth.MechanismDirect and no secret (Direct), then the
// entry that did decides the vhost and every permission, as for an AMQP
// login.
func (l *Logins) DirectAccess(ctx context.Context, user, vh string, stored Stored) (*session.Access, error) {
	if l.chain == nil {
		_, err := l.guard.Lookup(ctx, user)
		switch {
		case login.Unavailable(err):
			return nil, directFailed(ctx, err)
		case err != nil:
			return nil, amqp.NewError(amqp.AccessRefused, amqp.ClassConnection, amqp.MethodConnectionOpen, "user '%s' - no such user", user)
		}
		return StoredAccess(ctx, stored, user, vh)
	}
	name, z, err := l.Direct(ctx, user)
	if err != nil {
		return nil, err
	}
	if z == nil {
		return StoredAccess(ctx, stored, name, vh)
	}
	a, aerr := l.VHostAccess(z, vh)
	if aerr != nil {
		return nil, aerr
	}
	return a, nil
}

// StoredAccess is what stored answers for user on vh as one error: the
// refusal, a 320 *amqp.Error for a store that did not answer, or ctx's
// error once ctx ended (the caller gave up; the store may be fine).
func StoredAccess(ctx context.Context, stored Stored, user, vh string) (*session.Access, error) {
	a, refusal, unavailable := stored(ctx, user, vh)
	switch {
	case unavailable != nil:
		return nil, directFailed(ctx, unavailable)
	case refusal != nil:
		return nil, refusal
	}
	return a, nil
}

func directFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return Unavailable(err, amqp.ClassConnection, amqp.MethodConnectionOpen)
}
