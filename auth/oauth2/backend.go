package oauth2

import (
	"context"

	"github.com/warrenmq/broker/auth"
)

// Name is the backend's name in a Chain and in log lines (RabbitMQ's
// auth_backends.N = oauth2).
const Name = "oauth2"

// Backend is rabbitmq_auth_backend_oauth2 as an auth.Authenticator and
// auth.Authorizer. It is safe for concurrent use.
type Backend struct {
	c *compiled
}

// New checks cfg and returns its Backend. It does not contact the
// identity provider: the key set is fetched by the first login that
// needs it.
func New(cfg Config) (*Backend, error) {
	c, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	return &Backend{c: c}, nil
}

// Entry is the Backend as a Chain entry named Name, authenticating and
// authorising.
func (b *Backend) Entry() auth.Backend { return auth.Backend{Name: Name, Authn: b, Authz: b} }

// Verify checks a raw access token and returns what it grants. A token
// that fails any check is a refusal (wrapping auth.ErrRefused); any other
// error means the key set could not be fetched.
func (b *Backend) Verify(ctx context.Context, raw string) (*Token, error) {
	return b.c.verify(ctx, raw)
}

// Authenticate takes the password as the token and ignores the user name
// (rabbit_auth_backend_oauth2:user_login_authentication); the Identity's
// user is the token's preferred username claim, its tags the token's
// tag scopes, Expires its exp and Impl the *Token.
func (b *Backend) Authenticate(ctx context.Context, req auth.Request) (auth.Identity, error) {
	if req.Mechanism == "EXTERNAL" {
		return auth.Identity{}, auth.Refuse("oauth2 takes a token as the password, not a client certificate")
	}
	t, err := b.c.verify(ctx, req.Secret)
	if err != nil {
		return auth.Identity{}, err
	}
	return identity(t), nil
}

func identity(t *Token) auth.Identity {
	return auth.Identity{User: t.User, Tags: t.Tags, Expires: t.Expires, Impl: t}
}

// Refresh checks a new token for an authenticated Identity, as RabbitMQ's
// update_state does for connection.update-secret: the new token must be
// valid and name the same user; the Identity returned carries the new
// token's scopes, tags and expiry.
func (b *Backend) Refresh(ctx context.Context, id auth.Identity, raw string) (auth.Identity, error) {
	t, err := b.c.verify(ctx, raw)
	if err != nil {
		return auth.Identity{}, err
	}
	if t.User != id.User {
		return auth.Identity{}, auth.Refuse("not allowed to change username on refreshed token (%q to %q)", id.User, t.User)
	}
	return identity(t), nil
}

// token is the live *Token of an Identity this backend authenticated,
// nil when it is not one or it has expired.
func (b *Backend) token(id auth.Identity) *Token {
	t, ok := id.Impl.(*Token)
	if !ok || t == nil || !t.Expires.After(b.c.now()) {
		return nil
	}
	return t
}

// VHostAccess is Token.VHostAccess; an expired token, or an Identity not
// from this backend, is allowed nothing.
func (b *Backend) VHostAccess(_ context.Context, id auth.Identity, vhost string) (bool, error) {
	t := b.token(id)
	return t != nil && t.VHostAccess(vhost), nil
}

// ResourceAccess is Token.ResourceAccess, allowing nothing once expired.
func (b *Backend) ResourceAccess(_ context.Context, id auth.Identity, r auth.Resource, p auth.Permission) (bool, error) {
	t := b.token(id)
	return t != nil && t.ResourceAccess(r, p), nil
}

// TopicAccess is Token.TopicAccess, allowing nothing once expired.
func (b *Backend) TopicAccess(_ context.Context, id auth.Identity, r auth.Resource, p auth.Permission, key string) (bool, error) {
	t := b.token(id)
	return t != nil && t.TopicAccess(r, p, key), nil
}
