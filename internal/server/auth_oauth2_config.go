package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/warrenmq/broker/auth/oauth2"
	"github.com/warrenmq/broker/internal/rabbitconf"
)

// oauthConfig collects rabbitmq.conf's auth_oauth2.* keys (RabbitMQ 4.x's
// rabbitmq_auth_backend_oauth2.schema) for oauth2.Config. Numbered keys
// (preferred_username_claims.N, algorithms.N, scope_aliases.N.alias /
// .scope) are kept by N and put in order by config.
type oauthConfig struct {
	cfg        oauth2.Config
	claims     map[int]string
	algorithms map[int]string
	// aliasPairs are scope_aliases.N.alias and .N.scope, by N.
	aliasPairs map[int]*[2]string
	caFile     string
	verifyNone bool
}

// oauthUnsupported are auth_oauth2 keys (or key prefixes, ending in ".")
// RabbitMQ has and Warren refuses, with why.
var oauthUnsupported = []struct{ key, why string }{
	{"resource_servers.", "several resource servers are not supported"},
	{"oauth_providers.", "several OAuth providers are not supported"},
	{"default_oauth_provider", "several OAuth providers are not supported"},
	{"resource_server_type", "Rich Authorization Requests are not supported"},
	{"discovery_endpoint_params.", "discovery endpoint parameters are not supported"},
	{"token_endpoint", "the management UI's OAuth login flow is not supported"},
	{"authorization_endpoint", "the management UI's OAuth login flow is not supported"},
	{"end_session_endpoint", "the management UI's OAuth login flow is not supported"},
	{"authorization_failure_disclosure", "not supported"},
	{"https.depth", "not supported (Go's verifier has no depth limit)"},
	{"https.hostname_verification", "not supported: the host name is always verified (or nothing is, with https.peer_verification = verify_none)"},
	{"https.crl_check", "CRL checks are not supported"},
	{"https.fail_if_no_peer_cert", "not supported (a server option)"},
}

// register adds the auth_oauth2.* keys to tab, each checked with its
// line; a key RabbitMQ has that Warren does not map is refused saying so.
func (oc *oauthConfig) register(tab *rabbitconf.Table) {
	tab.Prefix("auth_oauth2.", func(e rabbitconf.Entry) error { return oc.set(strings.TrimPrefix(e.Key, "auth_oauth2."), e.Value) })
}

func (oc *oauthConfig) set(k, v string) error {
	for _, u := range oauthUnsupported {
		if k == u.key || strings.HasSuffix(u.key, ".") && strings.HasPrefix(k, u.key) {
			return errors.New(u.why)
		}
	}
	num := func(prefix string) (int, error) {
		n, err := strconv.Atoi(strings.TrimPrefix(k, prefix))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("the N in %sN must be a number", prefix)
		}
		return n, nil
	}
	c := &oc.cfg
	switch {
	case k == "resource_server_id":
		c.ResourceServerID = v
	case k == "scope_prefix":
		// RabbitMQ writes the empty prefix as ''.
		c.EmptyScopePrefix = v == "''"
		c.ScopePrefix = ""
		if !c.EmptyScopePrefix {
			c.ScopePrefix = v
		}
	case k == "verify_aud":
		b, err := rabbitconf.Bool(v)
		c.SkipAudienceCheck = !b
		return err
	case k == "additional_scopes_key":
		c.AdditionalScopesKey = v
	case k == "jwks_url", k == "jwks_uri":
		c.JWKSURL = v
	case k == "issuer":
		c.Issuer = v
	case k == "discovery_endpoint_path":
		c.DiscoveryPath = v
	case k == "default_key":
		c.DefaultKey = v
	case strings.HasPrefix(k, "signing_keys."):
		kid := strings.TrimPrefix(k, "signing_keys.")
		data, err := os.ReadFile(v)
		if err != nil {
			return fmt.Errorf("signing key %q: %w", kid, err)
		}
		if c.SigningKeys == nil {
			c.SigningKeys = map[string][]byte{}
		}
		c.SigningKeys[kid] = data
	case strings.HasPrefix(k, "preferred_username_claims."):
		n, err := num("preferred_username_claims.")
		if err != nil {
			return err
		}
		if oc.claims == nil {
			oc.claims = map[int]string{}
		}
		oc.claims[n] = v
	case strings.HasPrefix(k, "algorithms."):
		n, err := num("algorithms.")
		if err != nil {
			return err
		}
		if oc.algorithms == nil {
			oc.algorithms = map[int]string{}
		}
		oc.algorithms[n] = v
	case strings.HasPrefix(k, "scope_aliases."):
		return oc.setAlias(strings.TrimPrefix(k, "scope_aliases."), v)
	case k == "https.cacertfile":
		oc.caFile = v
	case k == "https.peer_verification", k == "https.verify":
		switch v {
		case "verify_peer":
			oc.verifyNone = false
		case "verify_none":
			oc.verifyNone = true
		default:
			return fmt.Errorf("%q is neither verify_peer nor verify_none", v)
		}
	default:
		return fmt.Errorf("unknown key auth_oauth2.%s", k)
	}
	return nil
}

// setAlias is scope_aliases.<alias> = <scopes>, or scope_aliases.N.alias
// and scope_aliases.N.scope (RabbitMQ's rabbit_oauth2_schema: scopes
// space-separated).
func (oc *oauthConfig) setAlias(rest, v string) error {
	numStr, attr, ok := strings.Cut(rest, ".")
	if n, err := strconv.Atoi(numStr); ok && err == nil {
		if attr != "alias" && attr != "scope" {
			return fmt.Errorf("scope_aliases.%d takes .alias or .scope, not .%s", n, attr)
		}
		if oc.aliasPairs == nil {
			oc.aliasPairs = map[int]*[2]string{}
		}
		p := oc.aliasPairs[n]
		if p == nil {
			p = new([2]string)
			oc.aliasPairs[n] = p
		}
		if attr == "alias" {
			p[0] = v
		} else {
			p[1] = v
		}
		return nil
	}
	if oc.cfg.ScopeAliases == nil {
		oc.cfg.ScopeAliases = map[string][]string{}
	}
	oc.cfg.ScopeAliases[rest] = strings.Fields(v)
	return nil
}

// config is the oauth2.Config the keys make.
func (oc *oauthConfig) config() (oauth2.Config, error) {
	c := oc.cfg
	c.PreferredUsernameClaims = byNumber(oc.claims)
	c.Algorithms = byNumber(oc.algorithms)
	if len(oc.aliasPairs) > 0 {
		aliases := make(map[string][]string, len(c.ScopeAliases)+len(oc.aliasPairs))
		for k, v := range c.ScopeAliases {
			aliases[k] = v
		}
		for _, n := range sortedKeys(oc.aliasPairs) {
			p := oc.aliasPairs[n]
			if p[0] == "" || p[1] == "" {
				return c, fmt.Errorf("scope_aliases.%d needs both .alias and .scope", n)
			}
			aliases[p[0]] = strings.Fields(p[1])
		}
		c.ScopeAliases = aliases
	}
	if oc.caFile != "" || oc.verifyNone {
		tc := &tls.Config{InsecureSkipVerify: oc.verifyNone} //nolint:gosec // https.peer_verification = verify_none asks for it
		if oc.caFile != "" {
			pem, err := os.ReadFile(oc.caFile)
			if err != nil {
				return c, fmt.Errorf("https.cacertfile: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return c, fmt.Errorf("https.cacertfile %s: no PEM certificate in it", oc.caFile)
			}
			tc.RootCAs = pool
		}
		c.TLS = tc
	}
	return c, nil
}

func sortedKeys[V any](m map[int]V) []int {
	ns := make([]int, 0, len(m))
	for n := range m {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// byNumber is m's values in the order of their N.
func byNumber(m map[int]string) []string {
	var out []string
	for _, n := range sortedKeys(m) {
		out = append(out, m[n])
	}
	return out
}

// lateHandler is a slog.Handler whose destination is set after it is
// handed out (set), discarding until then: the LDAP backend is built while
// rabbitmq.conf is read, before the server's logger exists.
type lateHandler struct{ h atomic.Pointer[slog.Handler] }

func (l *lateHandler) set(h slog.Handler) { l.h.Store(&h) }

func (l *lateHandler) target() slog.Handler {
	if p := l.h.Load(); p != nil {
		return *p
	}
	return slog.DiscardHandler
}

// Enabled, Handle, WithAttrs and WithGroup are slog.Handler's, asked of
// the destination set when they are called.
func (l *lateHandler) Enabled(ctx context.Context, lv slog.Level) bool {
	return l.target().Enabled(ctx, lv)
}
func (l *lateHandler) Handle(ctx context.Context, r slog.Record) error {
	return l.target().Handle(ctx, r)
}
func (l *lateHandler) WithAttrs(as []slog.Attr) slog.Handler { return l.target().WithAttrs(as) }
func (l *lateHandler) WithGroup(n string) slog.Handler       { return l.target().WithGroup(n) }
