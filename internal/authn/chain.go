package authn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/meta"
)

// authz is how the connection of Login lg decides its permissions: nil
// when the user database does (auth.InternalAuthz: the stored grants,
// shared and as fast as without a chain), else the Authorizer of the entry
// that let the user in, asked within the timeout (a nil Authorizer allows
// everything).
func (l *Logins) authz(lg auth.Login, peer net.Addr) *session.Authz {
	if lg.Authz == auth.InternalAuthz {
		return nil
	}
	return &session.Authz{Authorizer: lg.Authz, Identity: lg.Identity, Backend: lg.Backend, Peer: peer, Timeout: l.timeout}
}

// VHostAccess is the Access of a user whose permissions z decides on the
// vhost named vh, once the Authorizer allowed the vhost (RabbitMQ's
// check_vhost_access at connection.open): a refusal is RabbitMQ's 530
// text, an undecided answer 320. A nil Authorizer allows every vhost and
// permission; its Access still holds the identity for the user_id check.
func (l *Logins) VHostAccess(z *session.Authz, vh string) (*session.Access, *amqp.Error) {
	if z.Authorizer == nil {
		return session.NewAuthzAccess(vh, z), nil
	}
	ok, err := z.Ask(func(ctx context.Context) (bool, error) { return z.Authorizer.VHostAccess(ctx, z.Identity, vh) })
	switch {
	case err != nil:
		l.log.Warn("broker: vhost access not decided", "user", session.LogName(z.Identity.User), "vhost", vh, "backend", z.Backend, "err", err)
		return nil, amqp.NewError(amqp.ConnectionForced, amqp.ClassConnection, amqp.MethodConnectionOpen,
			"cannot check vhost access now: backend %s did not decide (%v); try again", z.Backend, err)
	case !ok:
		l.log.Info("broker: vhost access refused", "user", session.LogName(z.Identity.User), "vhost", vh, "backend", z.Backend)
		return nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "access to vhost '%s' refused for user '%s'", vh, z.Identity.User)
	}
	return session.NewAuthzAccess(vh, z), nil
}

// ask asks the chain within the timeout, in its own goroutine so that a
// backend that ignores its context still cannot hold the login (or the
// connection's handshake) past the timeout. The caller has waited out the
// throttle; a refusal is counted here against src ("" counts nothing: a
// direct Channel's login).
func (l *Logins) ask(ctx context.Context, src string, req auth.Request) (auth.Login, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	type answer struct {
		l   auth.Login
		err error
	}
	done := make(chan answer, 1)
	go func() {
		lg, err := l.chain.Authenticate(ctx, req)
		done <- answer{lg, err}
	}()
	var ans answer
	select {
	case ans = <-done:
	case <-ctx.Done():
		ans.err = fmt.Errorf("no answer within %v: %w", l.timeout, ctx.Err())
	}
	switch {
	case ans.err == nil:
		l.log.Info("broker: login", "user", session.LogName(ans.l.Identity.User), "mechanism", req.Mechanism, "backend", ans.l.Backend)
	case errors.Is(ans.err, auth.ErrRefused):
		if src != "" {
			l.guard.Throttle.Failed(src)
		}
		l.log.Warn("broker: login refused", "user", session.LogName(req.User), "mechanism", req.Mechanism, "reason", ans.err.Error())
	default:
		l.log.Warn("broker: login not decided: no backend answered", "user", session.LogName(req.User), "mechanism", req.Mechanism, "err", ans.err)
	}
	return ans.l, ans.err
}

// chainAMQP is AMQP through the chain.
func (l *Logins) chainAMQP(src string, at *session.LoginAttempt) (bool, string, error) {
	req := auth.Request{Mechanism: at.Mechanism, User: at.User, Secret: at.Password, Peer: at.Peer}
	if at.TLS != nil && len(at.TLS.VerifiedChains) > 0 {
		req.Cert = at.TLS.PeerCertificates[0]
	}
	lg, err := l.ask(context.Background(), src, req)
	switch {
	case err == nil:
		// The backend names the user, as RabbitMQ's auth_user does: an
		// OAuth 2 token's claim, whatever user name the client sent.
		at.User = lg.Identity.User
		at.Expires = lg.Identity.Expires
		at.Authz = l.authz(lg, at.Peer)
		return true, "", nil
	case errors.Is(err, auth.ErrRefused):
		// The reason is logged (ask); the client gets RabbitMQ's text
		// that does not say whether the user exists.
		return false, "", nil
	}
	return false, "", Unavailable(err, amqp.ClassConnection, amqp.MethodConnectionStartOk)
}

// chainPassword is Password through the chain.
func (l *Logins) chainPassword(ctx context.Context, peer net.Addr, name, password string) (meta.User, *session.Authz, error) {
	src := login.SourceKey(peer)
	if !l.guard.Wait(ctx, src) {
		return meta.User{}, nil, login.ErrClosed
	}
	lg, err := l.ask(ctx, src, auth.Request{Mechanism: "HTTP", User: name, Secret: password, Peer: peer})
	switch {
	case err == nil:
		return meta.User{Name: lg.Identity.User, Tags: lg.Identity.Tags}, l.authz(lg, peer), nil
	case errors.Is(err, auth.ErrRefused):
		return meta.User{}, nil, login.ErrRefused
	}
	return meta.User{}, nil, fmt.Errorf("%w: %w", login.ErrUnavailable, err)
}

// Direct logs user in through the chain for a direct Channel: asked with
// auth.MechanismDirect and no secret (RabbitMQ's direct connections ask
// their backends the same, user name only). It returns the user the
// backend named and how its permissions are decided (nil: the stored
// grants). A refusal is a 403 *amqp.Error, a chain that did not answer a
// 320 one, or ctx's error when ctx ended.
func (l *Logins) Direct(ctx context.Context, user string) (string, *session.Authz, error) {
	lg, err := l.ask(ctx, "", auth.Request{Mechanism: auth.MechanismDirect, User: user})
	switch {
	case errors.Is(err, auth.ErrRefused):
		return "", nil, amqp.NewError(amqp.AccessRefused, amqp.ClassConnection, amqp.MethodConnectionOpen, "user '%s' - refused by every authentication backend", user)
	case err != nil:
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		return "", nil, Unavailable(err, amqp.ClassConnection, amqp.MethodConnectionOpen)
	}
	return lg.Identity.User, l.authz(lg, nil), nil
}

// UpdateSecret is session.Config.UpdateSecret, asked only on connections
// whose credential expires (an OAuth 2 token): the chain checks the new
// secret as a login, as RabbitMQ's update_state asks the backends whose
// credentials expire, and the new credential must name the same user
// (RabbitMQ: "Not allowed to change username on refreshed token"). Its
// expiry replaces the connection's, and its Identity (scopes, tags) with
// the Authorizer of the entry that accepted it decide the connection's
// permissions from then on.
func (l *Logins) UpdateSecret(user, secret string, peer net.Addr) (bool, *session.Authz, time.Time, error) {
	if l.chain == nil {
		// Only chain logins expire; nothing can check the secret.
		return false, nil, time.Time{}, nil
	}
	lg, err := l.ask(context.Background(), login.SourceKey(peer), auth.Request{Mechanism: "PLAIN", User: user, Secret: secret, Peer: peer})
	switch {
	case err == nil && lg.Identity.User == user:
		return true, l.authz(lg, peer), lg.Identity.Expires, nil
	case err == nil:
		l.log.Warn("broker: new secret refused: not allowed to change username on refreshed token", "user", session.LogName(user), "new_user", session.LogName(lg.Identity.User))
		return false, nil, time.Time{}, nil
	case errors.Is(err, auth.ErrRefused):
		return false, nil, time.Time{}, nil
	}
	return false, nil, time.Time{}, Unavailable(err, amqp.ClassConnection, amqp.MethodConnectionUpdateSecret)
}

// Asker is a session.Authz as the auth.Authorizer the management API asks
// (mgmt.Caller.Authz): each question within the login timeout, in a
// goroutine of its own (session.Authz.Ask); a nil Authorizer allows
// everything. The identity asked about is the login's.
type Asker struct{ Z *session.Authz }

func (a Asker) VHostAccess(ctx context.Context, _ auth.Identity, vhost string) (bool, error) {
	if a.Z.Authorizer == nil {
		return true, nil
	}
	return a.Z.Ask(func(ctx context.Context) (bool, error) { return a.Z.Authorizer.VHostAccess(ctx, a.Z.Identity, vhost) })
}

func (a Asker) ResourceAccess(ctx context.Context, _ auth.Identity, r auth.Resource, p auth.Permission) (bool, error) {
	if a.Z.Authorizer == nil {
		return true, nil
	}
	return a.Z.Ask(func(ctx context.Context) (bool, error) { return a.Z.Authorizer.ResourceAccess(ctx, a.Z.Identity, r, p) })
}

func (a Asker) TopicAccess(ctx context.Context, _ auth.Identity, r auth.Resource, p auth.Permission, key string) (bool, error) {
	if a.Z.Authorizer == nil {
		return true, nil
	}
	return a.Z.Ask(func(ctx context.Context) (bool, error) {
		return a.Z.Authorizer.TopicAccess(ctx, a.Z.Identity, r, p, key)
	})
}
