package session

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/auth"
)

// Authz is how a connection decides permissions when an Options.Auth
// backend other than the user database let its user in: by asking that
// backend's auth.Authorizer about the Identity, as RabbitMQ asks the authz
// backends of the auth_backends entry that authenticated the user. The
// broker builds it at login (LoginAttempt.Authz) and hands it to
// Config.Open; it is never modified afterwards.
type Authz struct {
	// Authorizer decides; nil allows everything (auth.Backend's nil Authz).
	Authorizer auth.Authorizer
	Identity   auth.Identity
	// Backend names the chain entry, for log lines and error texts.
	Backend string
	// Peer is the client's address, handed to the Authorizer through the
	// context (auth.WithPeer).
	Peer net.Addr
	// Timeout bounds each question (Options.LoginTimeout).
	Timeout time.Duration
}

// Ask runs one question to the Authorizer within Timeout, in a goroutine
// of its own so that a backend that ignores its context still cannot hold
// the connection past the timeout (the goroutine is left to finish). An
// answer that does not come in time is an error: not decided.
func (z *Authz) Ask(f func(ctx context.Context) (bool, error)) (bool, error) {
	timeout := z.Timeout
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	ctx, cancel := context.WithTimeout(auth.WithPeer(context.Background(), z.Peer), timeout)
	defer cancel()
	type answer struct {
		ok  bool
		err error
	}
	done := make(chan answer, 1)
	go func() {
		ok, err := f(ctx)
		done <- answer{ok, err}
	}()
	select {
	case a := <-done:
		return a.ok, a.err
	case <-ctx.Done():
		return false, fmt.Errorf("no answer within %v: %w", timeout, ctx.Err())
	}
}

// NewAuthzAccess returns the Access of z's identity on vhost, deciding
// through z; a nil Authorizer allows every resource and topic, while the
// user_id check (checkUserID) still applies to the identity. Unlike the
// user database's Access it belongs to one connection: the decisions it
// caches are that connection's (Conn.decided).
func NewAuthzAccess(vhost string, z *Authz) *Access {
	return &Access{user: z.Identity.User, vhost: vhost, authz: z}
}

// permCacheSize and permCacheTTL shape the cache of allowed decisions a
// connection keeps when it asks an Authorizer (Conn.decided). RabbitMQ
// 4.x's channel keeps its last 12 allowed resource checks and 12 topic
// checks (?MAX_PERMISSION_CACHE_SIZE in rabbit_channel) until it
// hibernates, which an idle channel does after one to ten seconds; a busy
// channel would keep them for good. Warren keeps the last 12 of each for
// at most permCacheTTL from when they were asked, so that a revoked
// permission stops applying within that time even on a busy connection,
// while a stream of publishes to one exchange asks the backend once per
// permCacheTTL, not once per message. Refusals and errors are never kept.
const (
	permCacheSize = 12
	permCacheTTL  = 10 * time.Second
)

// decision is one allowed check: kind on resource name, or, for a topic
// check, kind on exchange name with routing or binding key.
type decision struct {
	kind      permKind
	resource  string
	name, key string
	asked     time.Time
}

// decisions are the allowed checks a connection remembers, newest first.
// Owned by the goroutine that handles the connection's methods.
type decisions struct {
	d [permCacheSize]decision
	n int
}

// decided is a connection's two caches of allowed checks: resources and
// topics. Two kilobytes, so a connection holds it only once it has asked
// an Authorizer.
type decided struct {
	resources, topics decisions
}

func (ds *decisions) allowed(now time.Time, kind permKind, resource, name, key string) bool {
	for i := range ds.n {
		d := &ds.d[i]
		if d.kind == kind && d.name == name && d.key == key && d.resource == resource {
			return now.Sub(d.asked) < permCacheTTL
		}
	}
	return false
}

func (ds *decisions) remember(d decision) {
	for i := range ds.n {
		o := &ds.d[i]
		if o.kind == d.kind && o.name == d.name && o.key == d.key && o.resource == d.resource {
			*o = d // a refreshed entry: asked again after expiring
			return
		}
	}
	if ds.n < permCacheSize {
		ds.n++
	}
	copy(ds.d[1:ds.n], ds.d[:ds.n-1])
	ds.d[0] = d
}

// authPermission is kind as auth names it.
func authPermission(kind permKind) auth.Permission {
	switch kind {
	case permWrite:
		return auth.Write
	case permRead:
		return auth.Read
	}
	return auth.Configure
}

// check is the permission check of every method that names a resource:
// the user database's grant (Access.check) or, for a user an Options.Auth
// backend let in, that backend's Authorizer through the connection's cache
// of allowed decisions (decide).
func (c *Conn) check(kind permKind, resource, name string, m amqp.Method) error {
	a := c.access
	if a == nil {
		return nil
	}
	if a.authz == nil {
		return a.check(kind, resource, name, m)
	}
	if a.authz.Authorizer == nil {
		return nil
	}
	if resource == "exchange" && name == "" {
		name = "amq.default" // rabbit_access_control's name for every backend
	}
	return c.decide(kind, resource, name, "", m)
}

// decide asks the Authorizer of c's Access whether kind is allowed on
// resource name (resource "topic": on topic exchange name with key),
// answering from c.decided when it allowed the same recently. A refusal is
// RabbitMQ's 403 ACCESS_REFUSED text, as the user database's; an
// Authorizer that could not decide (an error, or no answer within the
// timeout) closes the connection with 320 CONNECTION_FORCED "try again",
// as an undecided login does, so that a client does not take a backend
// outage for a permanent refusal.
func (c *Conn) decide(kind permKind, resource, name, key string, m amqp.Method) error {
	now := time.Now()
	if c.decided == nil {
		c.decided = new(decided)
	}
	cache := &c.decided.resources
	if resource == "topic" {
		cache = &c.decided.topics
	}
	if cache.allowed(now, kind, resource, name, key) {
		return nil
	}
	a := c.access
	z := a.authz
	r := auth.Resource{VHost: a.vhost, Kind: resource, Name: name}
	p := authPermission(kind)
	ok, err := z.Ask(func(ctx context.Context) (bool, error) {
		if resource == "topic" {
			return z.Authorizer.TopicAccess(ctx, z.Identity, r, p, key)
		}
		return z.Authorizer.ResourceAccess(ctx, z.Identity, r, p)
	})
	var cls, mth uint16
	if m != nil {
		cls, mth = m.ClassID(), m.MethodID()
	}
	what := fmt.Sprintf("%s '%s'", resource, name)
	if resource == "topic" {
		what = fmt.Sprintf("topic '%s' in exchange '%s'", key, name)
	}
	switch {
	case err != nil:
		c.log.Warn("session: permission not decided", "user", LogName(a.user), "vhost", a.vhost, "permission", p.String(), "resource", what, "backend", z.Backend, "err", err)
		return amqp.NewError(amqp.ConnectionForced, cls, mth,
			"cannot check %s access to %s in vhost '%s' now: backend %s did not decide (%v); try again", p, what, a.vhost, z.Backend, err)
	case !ok:
		c.log.Info("session: permission refused", "user", LogName(a.user), "vhost", a.vhost, "permission", p.String(), "resource", what, "backend", z.Backend)
		return amqp.NewError(amqp.AccessRefused, cls, mth, "access to %s in vhost '%s' refused for user '%s'", what, a.vhost, a.user)
	}
	cache.remember(decision{kind: kind, resource: resource, name: name, key: key, asked: now})
	return nil
}
