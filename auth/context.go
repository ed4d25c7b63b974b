package auth

import (
	"context"
	"errors"
	"net"
)

type peerKey struct{}

// WithPeer returns ctx carrying the client's address, which the broker
// adds to every Authorizer call so that a backend can decide by it (the
// HTTP backend sends it as vhost_path's ip, as RabbitMQ does).
func WithPeer(ctx context.Context, peer net.Addr) context.Context {
	if peer == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, peer)
}

// PeerFrom returns the client's address WithPeer put in ctx, nil when
// there is none (a direct Channel, or a call from outside a broker).
func PeerFrom(ctx context.Context) net.Addr {
	p, _ := ctx.Value(peerKey{}).(net.Addr)
	return p
}

// errInternalOutside is what InternalAuthz answers outside a broker.
var errInternalOutside = errors.New("auth: the internal user database decides only inside a broker")

// InternalAuthz names the broker's user database as the authorisation of
// a Backend (RabbitMQ's auth_backends.N.authz = internal): the broker
// replaces it with the permissions stored with Admin.PutPermission and
// Admin.PutTopicPermission, checked as fast as without Options.Auth. The
// Internal entry's nil Authz means the same. Outside a broker (wrapped in
// a Cache, say) it decides nothing: every call is an error.
var InternalAuthz Authorizer = internalAuthz{}

type internalAuthz struct{}

func (internalAuthz) VHostAccess(context.Context, Identity, string) (bool, error) {
	return false, errInternalOutside
}

func (internalAuthz) ResourceAccess(context.Context, Identity, Resource, Permission) (bool, error) {
	return false, errInternalOutside
}

func (internalAuthz) TopicAccess(context.Context, Identity, Resource, Permission, string) (bool, error) {
	return false, errInternalOutside
}
