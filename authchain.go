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
	// EXTERNAL (a verified certificate) and DIRECT (a Channel the
	// embedding program opens AsUser) prove the identity without a
	// password: the user must exist.
	if req.Mechanism != "EXTERNAL" && req.Mechanism != auth.MechanismDirect && !passwd.CheckExported(u.HashingAlgorithm, u.PasswordHash, req.Secret) {
		return auth.Identity{}, auth.Refuse("invalid credentials")
	}
	if req.User == "guest" && !a.b.opts.AllowRemoteGuest && !isLoopback(req.Peer) {
		return auth.Identity{}, auth.Refuse("user '%s' can only connect via localhost", req.User)
	}
	return auth.Identity{User: u.Name, Tags: u.Tags}, nil
}

// authChain is Options.Auth with auth.Internal filled in (its
// authentication the user database, its authorisation
// auth.InternalAuthz), nil when Options.Auth is empty.
func (b *Broker) authChain() auth.Chain {
	if len(b.opts.Auth) == 0 {
		return nil
	}
	c := make(auth.Chain, len(b.opts.Auth))
	for i, e := range b.opts.Auth {
		if e.Name == auth.InternalName && e.Authn == nil {
			e.Authn = internalAuthn{b}
		}
		if e.Name == auth.InternalName && e.Authz == nil {
			e.Authz = auth.InternalAuthz
		}
		c[i] = e
	}
	return c
}

// loginAuthz is how the connection of Login l decides its permissions:
// nil when the user database does (auth.InternalAuthz: the stored grants,
// shared and as fast as without Options.Auth), else the Authorizer of the
// entry that let the user in, asked within Options.LoginTimeout (a nil
// Authorizer allows everything).
func (b *Broker) loginAuthz(l auth.Login, peer net.Addr) *session.Authz {
	if l.Authz == auth.InternalAuthz {
		return nil
	}
	return &session.Authz{Authorizer: l.Authz, Identity: l.Identity, Backend: l.Backend, Peer: peer, Timeout: b.opts.LoginTimeout}
}

// errAuthzUnavailable is the 320 of a permission an Authorizer could not
// decide at connection.open (or a direct Channel's open): "try again",
// never 403 or 530.
func errAuthzUnavailable(backend string, err error) *amqp.Error {
	return amqp.NewError(amqp.ConnectionForced, amqp.ClassConnection, amqp.MethodConnectionOpen,
		"cannot check vhost access now: backend %s did not decide (%v); try again", backend, err)
}

// authzAccess is the Access of a user whose permissions z decides on the
// vhost named vh, once the Authorizer allowed the vhost (RabbitMQ's
// check_vhost_access at connection.open): a refusal is RabbitMQ's 530
// text, an undecided answer 320. A nil Authorizer allows every vhost and
// permission; its Access still holds the identity for the user_id check.
func (b *Broker) authzAccess(z *session.Authz, vh string) (*session.Access, *amqp.Error) {
	if z.Authorizer == nil {
		return session.NewAuthzAccess(vh, z), nil
	}
	ok, err := z.Ask(func(ctx context.Context) (bool, error) { return z.Authorizer.VHostAccess(ctx, z.Identity, vh) })
	switch {
	case err != nil:
		b.log.Warn("broker: vhost access not decided", "user", session.LogName(z.Identity.User), "vhost", vh, "backend", z.Backend, "err", err)
		return nil, errAuthzUnavailable(z.Backend, err)
	case !ok:
		b.log.Info("broker: vhost access refused", "user", session.LogName(z.Identity.User), "vhost", vh, "backend", z.Backend)
		return nil, amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "access to vhost '%s' refused for user '%s'", vh, z.Identity.User)
	}
	return session.NewAuthzAccess(vh, z), nil
}

// chainLogin asks the chain within Options.LoginTimeout, in its own
// goroutine so that a backend that ignores its context still cannot hold
// the login (or the connection's handshake) past the timeout. The caller
// has waited out the throttle; a refusal is counted here against src
// ("" counts nothing: a direct Channel's login).
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
		if src != "" {
			b.acct.logins.Throttle.Failed(src)
		}
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
		at.Authz = b.loginAuthz(l, at.Peer)
		return true, "", nil
	case errors.Is(err, auth.ErrRefused):
		// The reason is logged (chainLogin); the client gets RabbitMQ's
		// text that does not say whether the user exists.
		return false, "", nil
	}
	return false, "", errLoginUnavailable(err, amqp.ClassConnection, amqp.MethodConnectionStartOk)
}

// chainPasswordLogin is passwordLoginAuthz through Options.Auth.
func (b *Broker) chainPasswordLogin(ctx context.Context, chain auth.Chain, peer net.Addr, name, password string) (User, *session.Authz, error) {
	src := login.SourceKey(peer)
	if !b.acct.logins.Wait(ctx, src) {
		return User{}, nil, login.ErrClosed
	}
	l, err := b.chainLogin(ctx, chain, src, auth.Request{Mechanism: "HTTP", User: name, Secret: password, Peer: peer})
	switch {
	case err == nil:
		return User{Name: l.Identity.User, Tags: l.Identity.Tags}, b.loginAuthz(l, peer), nil
	case errors.Is(err, auth.ErrRefused):
		return User{}, nil, login.ErrRefused
	}
	return User{}, nil, fmt.Errorf("%w: %w", login.ErrUnavailable, err)
}

// authzAsker is a session.Authz as the auth.Authorizer the management API
// asks (mgmt.Caller.Authz): each question within Options.LoginTimeout, in a
// goroutine of its own (session.Authz.Ask); a nil Authorizer allows
// everything. The identity asked about is the login's.
type authzAsker struct{ z *session.Authz }

func (a authzAsker) VHostAccess(ctx context.Context, _ auth.Identity, vhost string) (bool, error) {
	if a.z.Authorizer == nil {
		return true, nil
	}
	return a.z.Ask(func(ctx context.Context) (bool, error) { return a.z.Authorizer.VHostAccess(ctx, a.z.Identity, vhost) })
}

func (a authzAsker) ResourceAccess(ctx context.Context, _ auth.Identity, r auth.Resource, p auth.Permission) (bool, error) {
	if a.z.Authorizer == nil {
		return true, nil
	}
	return a.z.Ask(func(ctx context.Context) (bool, error) { return a.z.Authorizer.ResourceAccess(ctx, a.z.Identity, r, p) })
}

func (a authzAsker) TopicAccess(ctx context.Context, _ auth.Identity, r auth.Resource, p auth.Permission, key string) (bool, error) {
	if a.z.Authorizer == nil {
		return true, nil
	}
	return a.z.Ask(func(ctx context.Context) (bool, error) {
		return a.z.Authorizer.TopicAccess(ctx, a.z.Identity, r, p, key)
	})
}

// authzChannel opens a direct Channel on the vhost named vhostName whose
// permissions z decides (the management API's channel for a user an
// Options.Auth backend let in).
func (b *Broker) authzChannel(ctx context.Context, z *session.Authz, vhostName string) (*Channel, error) {
	vh, ok := b.lookupVHost(canonicalVHost(vhostName))
	if !ok {
		return nil, toError(amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "vhost %s not found", vhostName))
	}
	a, aerr := b.authzAccess(z, vh.Name())
	if aerr != nil {
		return nil, toError(aerr)
	}
	return b.openChannel(ctx, vh, z.Identity.User, a)
}

// chainDirectAccess is directAccess through Options.Auth: the chain is
// asked to log user in with auth.MechanismDirect and no secret (RabbitMQ's
// direct connections ask their backends the same, user name only), then
// the entry that did decides the vhost and every permission, as for an
// AMQP login.
func (b *Broker) chainDirectAccess(ctx context.Context, chain auth.Chain, user, vh string) (*session.Access, error) {
	l, err := b.chainLogin(ctx, chain, "", auth.Request{Mechanism: auth.MechanismDirect, User: user})
	switch {
	case errors.Is(err, auth.ErrRefused):
		return nil, toError(amqp.NewError(amqp.AccessRefused, amqp.ClassConnection, amqp.MethodConnectionOpen, "user '%s' - refused by every authentication backend", user))
	case err != nil:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, toError(errLoginUnavailable(err, amqp.ClassConnection, amqp.MethodConnectionOpen))
	}
	z := b.loginAuthz(l, nil)
	if z == nil {
		return b.storedAccess(ctx, l.Identity.User, vh)
	}
	a, aerr := b.authzAccess(z, vh)
	if aerr != nil {
		return nil, toError(aerr)
	}
	return a, nil
}

// storedChannel opens a direct Channel on the vhost named vhostName with
// user's stored permissions, for a user the chain already let in.
func (b *Broker) storedChannel(ctx context.Context, user, vhostName string) (*Channel, error) {
	vh, ok := b.lookupVHost(canonicalVHost(vhostName))
	if !ok {
		return nil, toError(amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "vhost %s not found", vhostName))
	}
	a, err := b.storedAccess(ctx, user, vh.Name())
	if err != nil {
		return nil, err
	}
	return b.openChannel(ctx, vh, user, a)
}

// updateSecret is session.Config.UpdateSecret, asked only on connections
// whose credential expires (an OAuth 2 token): the chain checks the new
// secret as a login, as RabbitMQ's update_state asks the backends whose
// credentials expire, and the new credential must name the same user
// (RabbitMQ: "Not allowed to change username on refreshed token"). Its
// expiry replaces the connection's, and its Identity (scopes, tags) with
// the Authorizer of the entry that accepted it decide the connection's
// permissions from then on.
func (b *Broker) updateSecret(user, secret string, peer net.Addr) (bool, *session.Authz, time.Time, error) {
	chain := b.authChain()
	if chain == nil {
		// Only chain logins expire; nothing can check the secret.
		return false, nil, time.Time{}, nil
	}
	l, err := b.chainLogin(context.Background(), chain, login.SourceKey(peer), auth.Request{Mechanism: "PLAIN", User: user, Secret: secret, Peer: peer})
	switch {
	case err == nil && l.Identity.User == user:
		return true, b.loginAuthz(l, peer), l.Identity.Expires, nil
	case err == nil:
		b.log.Warn("broker: new secret refused: not allowed to change username on refreshed token", "user", session.LogName(user), "new_user", session.LogName(l.Identity.User))
		return false, nil, time.Time{}, nil
	case errors.Is(err, auth.ErrRefused):
		return false, nil, time.Time{}, nil
	}
	return false, nil, time.Time{}, errLoginUnavailable(err, amqp.ClassConnection, amqp.MethodConnectionUpdateSecret)
}
