package auth

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"time"
)

// Cache remembers the allowed answers of the Authenticator and Authorizer
// it wraps for TTL, as rabbitmq_auth_backend_cache does with its defaults
// (cache_ttl, cache_refusals = false): refusals and errors are never
// remembered, so a user let in later is not kept out. Secrets are kept
// only as SHA-256 digests. At most Max entries are kept (0: 10000); when
// full, expired entries are dropped, and if none are, everything.
type Cache struct {
	Authn Authenticator
	Authz Authorizer
	TTL   time.Duration
	Max   int
	// Now, when set, replaces time.Now (tests).
	Now func() time.Time

	mu      sync.Mutex
	logins  map[[32]byte]cachedLogin
	allowed map[string]time.Time
}

type cachedLogin struct {
	id  Identity
	exp time.Time
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Cache) max() int {
	if c.Max > 0 {
		return c.Max
	}
	return 10000
}

// Backend is a Chain entry answering through the cache.
func (c *Cache) Backend(name string) Backend {
	b := Backend{Name: name}
	if c.Authn != nil {
		b.Authn = c
	}
	if c.Authz != nil {
		b.Authz = c
	}
	return b
}

func loginKey(req Request) [32]byte {
	h := sha256.New()
	for _, s := range []string{req.Mechanism, req.User, req.Secret} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if req.Cert != nil {
		h.Write(req.Cert.Raw)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Authenticate answers from the cache or asks Authn.
func (c *Cache) Authenticate(ctx context.Context, req Request) (Identity, error) {
	k := loginKey(req)
	now := c.now()
	c.mu.Lock()
	if e, ok := c.logins[k]; ok && now.Before(e.exp) {
		c.mu.Unlock()
		return e.id, nil
	}
	c.mu.Unlock()
	id, err := c.Authn.Authenticate(ctx, req)
	if err != nil {
		return id, err
	}
	c.mu.Lock()
	if c.logins == nil || len(c.logins) >= c.max() {
		c.logins = pruneLogins(c.logins, now)
	}
	c.logins[k] = cachedLogin{id: id, exp: now.Add(c.TTL)}
	c.mu.Unlock()
	return id, nil
}

func pruneLogins(m map[[32]byte]cachedLogin, now time.Time) map[[32]byte]cachedLogin {
	out := make(map[[32]byte]cachedLogin)
	for k, e := range m {
		if now.Before(e.exp) {
			out[k] = e
		}
	}
	return out
}

// decide answers key from the cache or asks ask, remembering an allow.
func (c *Cache) decide(key string, ask func() (bool, error)) (bool, error) {
	now := c.now()
	c.mu.Lock()
	if exp, ok := c.allowed[key]; ok && now.Before(exp) {
		c.mu.Unlock()
		return true, nil
	}
	c.mu.Unlock()
	ok, err := ask()
	if err != nil || !ok {
		return ok, err
	}
	c.mu.Lock()
	if c.allowed == nil || len(c.allowed) >= c.max() {
		out := make(map[string]time.Time)
		for k, exp := range c.allowed {
			if now.Before(exp) {
				out[k] = exp
			}
		}
		c.allowed = out
	}
	c.allowed[key] = now.Add(c.TTL)
	c.mu.Unlock()
	return true, nil
}

func decisionKey(parts ...string) string { return strings.Join(parts, "\x00") }

// VHostAccess answers from the cache or asks Authz.
func (c *Cache) VHostAccess(ctx context.Context, id Identity, vhost string) (bool, error) {
	return c.decide(decisionKey("v", id.User, vhost), func() (bool, error) { return c.Authz.VHostAccess(ctx, id, vhost) })
}

// ResourceAccess answers from the cache or asks Authz.
func (c *Cache) ResourceAccess(ctx context.Context, id Identity, r Resource, p Permission) (bool, error) {
	return c.decide(decisionKey("r", id.User, r.VHost, r.Kind, r.Name, p.String()), func() (bool, error) { return c.Authz.ResourceAccess(ctx, id, r, p) })
}

// TopicAccess answers from the cache or asks Authz.
func (c *Cache) TopicAccess(ctx context.Context, id Identity, r Resource, p Permission, key string) (bool, error) {
	return c.decide(decisionKey("t", id.User, r.VHost, r.Name, p.String(), key), func() (bool, error) { return c.Authz.TopicAccess(ctx, id, r, p, key) })
}
