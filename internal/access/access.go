package access

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/meta"
)

// Registry holds the shared Access of every (user, vhost) a connection
// opened. Its zero value is ready; it is safe for concurrent use.
type Registry struct {
	mu sync.Mutex
	m  map[key]*session.Access
}

type key struct{ user, vhost string }

// Shared returns the Access of (user, vh), created with g if new and
// otherwise updated to g (the store has the last word).
func (r *Registry) Shared(user, vh string, g *session.Grant) *session.Access {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key{user, vh}
	a := r.m[k]
	if a == nil {
		if r.m == nil {
			r.m = make(map[key]*session.Access)
		}
		a = session.NewAccess(user, vh, g)
		r.m[k] = a
		return a
	}
	a.Set(g)
	return a
}

// Set gives the open connections of user on vh (every vhost when vh is
// "") the grant g; nil refuses every check.
func (r *Registry) Set(user, vh string, g *session.Grant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, a := range r.m {
		if k.user == user && (vh == "" || k.vhost == vh) {
			a.Set(g)
		}
	}
}

// Revoke refuses every check of every open connection on vh (a deleted
// vhost).
func (r *Registry) Revoke(vh string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, a := range r.m {
		if k.vhost == vh {
			a.Set(nil)
		}
	}
}

// RefreshTopics gives the open connections of user on vh their stored
// topic permissions.
func (r *Registry) RefreshTopics(ctx context.Context, st meta.TopicPermissions, user, vh string) error {
	r.mu.Lock()
	a := r.m[key{user, vh}]
	r.mu.Unlock()
	if a == nil {
		return nil
	}
	t, err := TopicGrants(ctx, st, user, vh)
	if err != nil {
		return err
	}
	a.SetTopics(t)
	return nil
}

// Stored returns the shared Access of user on vh with the stored
// permission and topic permissions, each read within timeout. A user
// without a permission on vh is refused with RabbitMQ's 530; a permission
// that does not compile is a 541. unavailable is the store's error when
// it did not answer: the caller answers "try again", not a refusal.
func (r *Registry) Stored(ctx context.Context, st meta.Accounts, timeout time.Duration, user, vh string) (a *session.Access, refusal *amqp.Error, unavailable error) {
	refuse := func(code uint16, format string, args ...any) *amqp.Error {
		return amqp.NewError(code, amqp.ClassConnection, amqp.MethodConnectionOpen, format, args...)
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	p, err := st.GetPermission(lctx, user, vh)
	cancel()
	switch {
	case login.Unavailable(err):
		return nil, nil, err
	case err != nil:
		return nil, refuse(amqp.NotAllowed, "access to vhost '%s' refused for user '%s'", vh, user), nil
	}
	g, err := CompileGrant(p)
	if err != nil {
		return nil, refuse(amqp.InternalError, "%v", err), nil
	}
	lctx, cancel = context.WithTimeout(ctx, timeout)
	topics, err := TopicGrants(lctx, st, user, vh)
	cancel()
	switch {
	case login.Unavailable(err):
		return nil, nil, err
	case err != nil:
		return nil, refuse(amqp.InternalError, "%v", err), nil
	}
	a = r.Shared(user, vh, g)
	a.SetTopics(topics)
	return a, nil, nil
}

// CompileGrant is a permission's expressions compiled as the sessions
// check them (meta.Permission.Compile).
func CompileGrant(p meta.Permission) (*session.Grant, error) {
	c, w, r, err := p.Compile()
	if err != nil {
		return nil, err
	}
	return &session.Grant{Configure: c, Write: w, Read: r}, nil
}

// TopicPermissionsOf lists user's stored topic permissions on vh.
func TopicPermissionsOf(ctx context.Context, st meta.TopicPermissions, user, vh string) ([]meta.TopicPermission, error) {
	all, err := st.ListTopicPermissions(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker: topic permissions of %q: %w", user, err)
	}
	return slices.DeleteFunc(all, func(p meta.TopicPermission) bool { return p.User != user || p.VHost != vh }), nil
}

// TopicGrants compiles user's topic permissions on vh for a connection.
func TopicGrants(ctx context.Context, st meta.TopicPermissions, user, vh string) (session.TopicGrants, error) {
	tps, err := TopicPermissionsOf(ctx, st, user, vh)
	if err != nil || len(tps) == 0 {
		return nil, err
	}
	out := make(session.TopicGrants, len(tps))
	for _, p := range tps {
		g, err := CompileTopicGrant(p)
		if err != nil {
			return nil, err
		}
		out[p.Exchange] = g
	}
	return out, nil
}

// CompileTopicGrant compiles a topic permission as RabbitMQ's internal
// backend matches it (rabbit_auth_backend_internal:check_topic_access):
// {username} and {vhost} replaced by the permission's user and vhost as
// they are (no escaping, as expand_topic_permission does), "" meaning
// "^$", matched unanchored.
func CompileTopicGrant(p meta.TopicPermission) (session.TopicGrant, error) {
	var g session.TopicGrant
	for _, f := range []struct {
		what string
		expr string
		dst  **regexp.Regexp
	}{{"write", p.Write, &g.Write}, {"read", p.Read, &g.Read}} {
		expr := f.expr
		if expr == "" {
			expr = "^$"
		}
		expr = strings.NewReplacer("{username}", p.User, "{vhost}", p.VHost).Replace(expr)
		re, err := regexp.Compile(expr)
		if err != nil {
			return session.TopicGrant{}, fmt.Errorf("broker: topic %s permission %q: %w", f.what, f.expr, err)
		}
		*f.dst = re
	}
	return g, nil
}
