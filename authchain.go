package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/internal/session"
)

// internalAuthn is the user database as an auth.Authenticator
// (auth.Internal in Options.Auth): the password checked against the
// stored hash, EXTERNAL by the user's existence, and RabbitMQ's
// loopback_users rule for guest.
type internalAuthn struct{ b *Broker }

func (a internalAuthn) Authenticate(ctx context.Context, req auth.Request) (auth.Identity, error) {
	u, err := a.b.acct.logins.Lookup(ctx, req.User)
	if login.Unavailable(err) {
		return auth.Identity{}, err
	}
	if err != nil {
		return auth.Identity{}, auth.Refuse("user '%s' - no such user", req.User)
	}
	if req.Mechanism != "EXTERNAL" && !passwd.Check(u.PasswordHash, req.Secret) {
		return auth.Identity{}, auth.Refuse("invalid credentials")
	}
	if req.User == "guest" && !a.b.opts.AllowRemoteGuest && !isLoopback(req.Peer) {
		return auth.Identity{}, auth.Refuse("user '%s' can only connect via localhost", req.User)
	}
	return auth.Identity{User: u.Name, Tags: u.Tags}, nil
}

// authChain is Options.Auth with auth.Internal filled in, nil when
// Options.Auth is empty.
func (b *Broker) authChain() auth.Chain {
	if len(b.opts.Auth) == 0 {
		return nil
	}
	c := make(auth.Chain, len(b.opts.Auth))
	for i, e := range b.opts.Auth {
		if e.Name == auth.InternalName && e.Authn == nil {
			e.Authn = internalAuthn{b}
		}
		c[i] = e
	}
	return c
}

// chainLogin asks the chain within Options.LoginTimeout, in its own
// goroutine so that a backend that ignores its context still cannot hold
// the login (or the connection's handshake) past the timeout. The caller
// has waited out the throttle; a refusal is counted here.
func (b *Broker) chainLogin(ctx context.Context, chain auth.Chain, src string, req auth.Request) (auth.Login, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.LoginTimeout)
	defer cancel()
	type answer struct {
		l   auth.Login
		err error
	}
	done := make(chan answer, 1)
	go func() {
		l, err := chain.Authenticate(ctx, req)
		done <- answer{l, err}
	}()
	var ans answer
	select {
	case ans = <-done:
	case <-ctx.Done():
		ans.err = fmt.Errorf("no answer within %v: %w", b.opts.LoginTimeout, ctx.Err())
	}
	switch {
	case ans.err == nil:
		b.log.Info("broker: login", "user", session.LogName(ans.l.Identity.User), "mechanism", req.Mechanism, "backend", ans.l.Backend)
	case errors.Is(ans.err, auth.ErrRefused):
		b.acct.logins.Throttle.Failed(src)
		b.log.Warn("broker: login refused", "user", session.LogName(req.User), "mechanism", req.Mechanism, "reason", ans.err.Error())
	default:
		b.log.Warn("broker: login not decided: no backend answered", "user", session.LogName(req.User), "mechanism", req.Mechanism, "err", ans.err)
	}
	return ans.l, ans.err
}

// chainAMQPLogin is session.Config.Login through Options.Auth.
func (b *Broker) chainAMQPLogin(chain auth.Chain, src string, at *session.LoginAttempt) (bool, string, error) {
	req := auth.Request{Mechanism: at.Mechanism, User: at.User, Secret: at.Password, Peer: at.Peer}
	if at.TLS != nil && len(at.TLS.VerifiedChains) > 0 {
		req.Cert = at.TLS.PeerCertificates[0]
	}
	l, err := b.chainLogin(context.Background(), chain, src, req)
	switch {
	case err == nil:
		// The backend names the user, as RabbitMQ's auth_user does: an
		// OAuth 2 token's claim, whatever user name the client sent.
		at.User = l.Identity.User
		at.Expires = l.Identity.Expires
		return true, "", nil
	case errors.Is(err, auth.ErrRefused):
		// The reason is logged (chainLogin); the client gets RabbitMQ's
		// text that does not say whether the user exists.
		return false, "", nil
	}
	return false, "", errLoginUnavailable(err, amqp.ClassConnection, amqp.MethodConnectionStartOk)
}

// chainPasswordLogin is passwordLogin through Options.Auth.
func (b *Broker) chainPasswordLogin(ctx context.Context, chain auth.Chain, peer net.Addr, name, password string) (User, error) {
	src := login.SourceKey(peer)
	if !b.acct.logins.Wait(ctx, src) {
		return User{}, login.ErrClosed
	}
	l, err := b.chainLogin(ctx, chain, src, auth.Request{Mechanism: "HTTP", User: name, Secret: password, Peer: peer})
	switch {
	case err == nil:
		return User{Name: l.Identity.User, Tags: l.Identity.Tags}, nil
	case errors.Is(err, auth.ErrRefused):
		return User{}, login.ErrRefused
	}
	return User{}, fmt.Errorf("%w: %w", login.ErrUnavailable, err)
}

// updateSecret is session.Config.UpdateSecret, asked only on connections
// whose credential expires (an OAuth 2 token): the chain checks the new
// secret as a login, as RabbitMQ's update_state asks the backends whose
// credentials expire, and the new credential must name the same user
// (RabbitMQ: "Not allowed to change username on refreshed token"). Its
// expiry replaces the connection's.
func (b *Broker) updateSecret(user, secret string, peer net.Addr) (bool, time.Time, error) {
	chain := b.authChain()
	if chain == nil {
		// Only chain logins expire; nothing can check the secret.
		return false, time.Time{}, nil
	}
	l, err := b.chainLogin(context.Background(), chain, login.SourceKey(peer), auth.Request{Mechanism: "PLAIN", User: user, Secret: secret, Peer: peer})
	switch {
	case err == nil && l.Identity.User == user:
		return true, l.Identity.Expires, nil
	case err == nil:
		b.log.Warn("broker: new secret refused: not allowed to change username on refreshed token", "user", session.LogName(user), "new_user", session.LogName(l.Identity.User))
		return false, time.Time{}, nil
	case errors.Is(err, auth.ErrRefused):
		return false, time.Time{}, nil
	}
	return false, time.Time{}, errLoginUnavailable(err, amqp.ClassConnection, amqp.MethodConnectionUpdateSecret)
}
