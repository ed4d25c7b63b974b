package server

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/httpbackend"
	"github.com/warrenmq/broker/auth/ldap"
	"github.com/warrenmq/broker/auth/oauth2"
	"github.com/warrenmq/broker/internal/rabbitconf"
)

// authConfig collects a rabbitmq.conf's auth_backends.*, auth_http.*,
// auth_cache.*, auth_ldap.* and auth_oauth2.* keys (RabbitMQ 4.x's names,
// rabbit.schema and the rabbitmq_auth_backend_http, _cache, _ldap and
// _oauth2 schemas) and builds Options.Auth from them. Warren's own names
// are in docs/authentication.md.
type authConfig struct {
	entries map[int]*authEntry // auth_backends.N, by N
	http    httpbackend.Config
	ldap    ldap.Config
	oauth   oauthConfig
	// cached* are auth_cache.cached_backend, .authn and .authz.
	cachedBoth, cachedAuthn, cachedAuthz string
	cacheTTL                             time.Duration
	// ldapLog receives the LDAP backend's log lines once the server has
	// its logger (setLogger): the backend is built while the file is
	// read, before the logger exists.
	ldapLog lateHandler
	// built by build; nil: no auth_backends, the user database alone.
	chain auth.Chain
	hb    *httpbackend.Backend
	lb    *ldap.Backend
	ob    *oauth2.Backend
	cache *auth.Cache
}

// authEntry is auth_backends.N (both), .N.authn and .N.authz, each a
// backend kind ("" when not set).
type authEntry struct{ both, authn, authz string }

// authBackendKinds maps the names rabbitmq.conf gives backends, short and
// long (module) ones, to the kinds Warren builds.
var authBackendKinds = map[string]string{
	"internal": "internal", "rabbit_auth_backend_internal": "internal",
	"http": "http", "rabbit_auth_backend_http": "http",
	"cache": "cache", "rabbit_auth_backend_cache": "cache",
	"ldap": "ldap", "rabbit_auth_backend_ldap": "ldap",
	"oauth2": "oauth2", "rabbit_auth_backend_oauth2": "oauth2",
}

func authKind(v string) (string, error) {
	if k, ok := authBackendKinds[v]; ok {
		return k, nil
	}
	return "", fmt.Errorf("auth backend %q is not available (Warren builds internal, http, cache, ldap and oauth2)", v)
}

// register adds the auth keys to tab.
func (ac *authConfig) register(tab *rabbitconf.Table) {
	tab.Prefix("auth_backends.", func(e rabbitconf.Entry) error {
		numStr, part, _ := strings.Cut(strings.TrimPrefix(e.Key, "auth_backends."), ".")
		n, err := strconv.Atoi(numStr)
		if err != nil || n < 1 {
			return fmt.Errorf("the position in auth_backends.N must be a positive integer, not %q", numStr)
		}
		kind, err := authKind(e.Value)
		if err != nil {
			return err
		}
		if ac.entries == nil {
			ac.entries = map[int]*authEntry{}
		}
		ent := ac.entries[n]
		if ent == nil {
			ent = &authEntry{}
			ac.entries[n] = ent
		}
		var dst *string
		switch part {
		case "":
			dst = &ent.both
		case "authn":
			dst = &ent.authn
		case "authz":
			dst = &ent.authz
		default:
			return fmt.Errorf("unknown key: auth_backends.N takes .authn or .authz, not .%s", part)
		}
		if *dst != "" {
			return errors.New("set twice")
		}
		*dst = kind
		if ent.both != "" && (ent.authn != "" || ent.authz != "") {
			return fmt.Errorf("auth backend %d is already defined by auth_backends.%d", n, n)
		}
		return nil
	})
	str := func(dst *string) rabbitconf.Handler {
		return func(e rabbitconf.Entry) error { *dst = e.Value; return nil }
	}
	millis := func(dst *time.Duration) rabbitconf.Handler {
		return func(e rabbitconf.Entry) error {
			ms, err := rabbitconf.Int(e.Value, 1<<40)
			*dst = time.Duration(ms) * time.Millisecond
			return err
		}
	}
	tab.Key("auth_http.http_method", func(e rabbitconf.Entry) error {
		switch e.Value {
		case "get", "post":
			ac.http.Method = e.Value
			return nil
		}
		return fmt.Errorf("%q is neither get nor post", e.Value)
	})
	tab.Key("auth_http.user_path", str(&ac.http.UserPath))
	tab.Key("auth_http.vhost_path", str(&ac.http.VHostPath))
	tab.Key("auth_http.resource_path", str(&ac.http.ResourcePath))
	tab.Key("auth_http.topic_path", str(&ac.http.TopicPath))
	tab.Key("auth_http.request_timeout", millis(&ac.http.RequestTimeout))
	tab.Key("auth_http.connection_timeout", millis(&ac.http.ConnectionTimeout))
	ac.cacheTTL = 15 * time.Second // rabbitmq_auth_backend_cache's default
	tab.Key("auth_cache.cache_ttl", millis(&ac.cacheTTL))
	cached := func(dst *string) rabbitconf.Handler {
		return func(e rabbitconf.Entry) error {
			kind, err := authKind(e.Value)
			switch {
			case err != nil:
			case kind == "cache":
				err = errors.New("the cache cannot cache itself")
			case kind == "oauth2":
				err = errors.New("oauth2 cannot sit behind the cache: it would answer for one token with another's scopes and past its expiry (docs/authentication.md)")
			}
			*dst = kind
			return err
		}
	}
	tab.Key("auth_cache.cached_backend", cached(&ac.cachedBoth))
	tab.Key("auth_cache.cached_backend.authn", cached(&ac.cachedAuthn))
	tab.Key("auth_cache.cached_backend.authz", cached(&ac.cachedAuthz))
	tab.Key("auth_cache.cache_refusals", func(e rabbitconf.Entry) error {
		b, err := rabbitconf.Bool(e.Value)
		if err == nil && b {
			err = errors.New("true is not supported: Warren's cache never remembers refusals (cache_refusals = false)")
		}
		return err
	})
	tab.Prefix(ldap.KeyPrefix, func(e rabbitconf.Entry) error { return ac.ldap.Set(e.Key, e.Value) })
	ac.oauth.register(tab)
}

// build makes ac.chain from the entries, in the order of their N. An
// entry with only .authn or only .authz uses that backend for both, as
// RabbitMQ does (with a warning there).
func (ac *authConfig) build() error {
	if len(ac.entries) == 0 {
		return nil
	}
	nums := make([]int, 0, len(ac.entries))
	for n := range ac.entries {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	for _, n := range nums {
		e := ac.entries[n]
		authn, authz := e.both, e.both
		if e.authn != "" {
			authn = e.authn
		}
		if e.authz != "" {
			authz = e.authz
		}
		if authn == "" {
			authn = authz
		}
		if authz == "" {
			authz = authn
		}
		b, err := ac.backend(authn, authz)
		if err != nil {
			return fmt.Errorf("auth_backends.%d: %w", n, err)
		}
		ac.chain = append(ac.chain, b)
	}
	return nil
}

// backend is one chain entry authenticating with kind authn and
// authorising with kind authz. The user database is the entry named
// auth.InternalName with no Authn (the broker supplies it) and
// auth.InternalAuthz; it is never cached (it is local, and RabbitMQ's docs
// call caching it of little use).
func (ac *authConfig) backend(authn, authz string) (auth.Backend, error) {
	b := auth.Backend{Name: authn}
	if authn != authz {
		b.Name = authn + "/" + authz
	}
	switch authn {
	case "internal":
		b.Name = auth.InternalName
	case "http":
		hb, err := ac.httpBackend()
		if err != nil {
			return b, err
		}
		b.Authn = hb
	case "ldap":
		lb, err := ac.ldapBackend()
		if err != nil {
			return b, err
		}
		b.Authn = lb
	case "oauth2":
		ob, err := ac.oauthBackend()
		if err != nil {
			return b, err
		}
		b.Authn = ob
	case "cache":
		c, err := ac.cached()
		if err != nil {
			return b, err
		}
		if c.Authn == nil { // caching the user database: it is asked itself
			b.Name = auth.InternalName
		} else {
			b.Authn = c
		}
	}
	switch authz {
	case "internal":
		b.Authz = auth.InternalAuthz
	case "http":
		hb, err := ac.httpBackend()
		if err != nil {
			return b, err
		}
		b.Authz = hb
	case "ldap":
		lb, err := ac.ldapBackend()
		if err != nil {
			return b, err
		}
		b.Authz = lb
	case "oauth2":
		ob, err := ac.oauthBackend()
		if err != nil {
			return b, err
		}
		b.Authz = ob
	case "cache":
		c, err := ac.cached()
		if err != nil {
			return b, err
		}
		if c.Authz == nil {
			b.Authz = auth.InternalAuthz
		} else {
			b.Authz = c
		}
	}
	return b, nil
}

// httpBackend is the one HTTP backend every entry shares.
func (ac *authConfig) httpBackend() (*httpbackend.Backend, error) {
	if ac.hb != nil {
		return ac.hb, nil
	}
	hb, err := httpbackend.New(ac.http)
	if err != nil {
		return nil, fmt.Errorf("auth_http: %w", err)
	}
	ac.hb = hb
	return hb, nil
}

// cached is the one cache every entry shares, over auth_cache's
// cached_backend (rabbitmq_auth_backend_cache's rules: .authn and .authz,
// either standing for both, or cached_backend alone; internal when none
// is set). A cached internal half is left nil: the user database answers
// itself.
func (ac *authConfig) cached() (*auth.Cache, error) {
	if ac.cache != nil {
		return ac.cache, nil
	}
	if ac.cachedBoth != "" && (ac.cachedAuthn != "" || ac.cachedAuthz != "") {
		return nil, errors.New("auth_cache.cached_backend is already defined by auth_cache.cached_backend.authn/.authz")
	}
	authn, authz := ac.cachedBoth, ac.cachedBoth
	if ac.cachedAuthn != "" || ac.cachedAuthz != "" {
		authn, authz = ac.cachedAuthn, ac.cachedAuthz
		if authn == "" {
			authn = authz
		}
		if authz == "" {
			authz = authn
		}
	}
	c := &auth.Cache{TTL: ac.cacheTTL}
	if authn == "http" || authz == "http" {
		hb, err := ac.httpBackend()
		if err != nil {
			return nil, err
		}
		if authn == "http" {
			c.Authn = hb
		}
		if authz == "http" {
			c.Authz = hb
		}
	}
	if authn == "ldap" || authz == "ldap" {
		lb, err := ac.ldapBackend()
		if err != nil {
			return nil, err
		}
		if authn == "ldap" {
			c.Authn = lb
		}
		if authz == "ldap" {
			c.Authz = lb
		}
	}
	ac.cache = c
	return c, nil
}

// ldapBackend is the one LDAP backend every entry shares, logging through
// ac.ldapLog.
func (ac *authConfig) ldapBackend() (*ldap.Backend, error) {
	if ac.lb != nil {
		return ac.lb, nil
	}
	cfg := ac.ldap
	cfg.Logger = slog.New(&ac.ldapLog)
	lb, err := ldap.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("auth_ldap: %w", err)
	}
	ac.lb = lb
	return lb, nil
}

// oauthBackend is the one OAuth 2.0 backend every entry shares.
func (ac *authConfig) oauthBackend() (*oauth2.Backend, error) {
	if ac.ob != nil {
		return ac.ob, nil
	}
	cfg, err := ac.oauth.config()
	if err != nil {
		return nil, fmt.Errorf("auth_oauth2: %w", err)
	}
	ob, err := oauth2.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("auth_oauth2: %w", err)
	}
	ac.ob = ob
	return ob, nil
}

// setLogger sends the LDAP backend's log lines to l from now on.
func (ac *authConfig) setLogger(l *slog.Logger) { ac.ldapLog.set(l.Handler()) }

// close closes what build opened: the LDAP backend's pooled connections.
func (ac *authConfig) close() {
	if ac.lb != nil {
		_ = ac.lb.Close()
	}
}
