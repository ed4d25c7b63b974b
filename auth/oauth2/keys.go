package oauth2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/warrenmq/broker/auth"
)

// key is one verification key: a crypto public key, or the secret of a
// configured HMAC key. alg, when set, is the only algorithm it checks.
type key struct {
	pub any
	alg string
}

// maxJWKSBytes bounds a key set or discovery document read from the
// provider.
const maxJWKSBytes = 1 << 20

// keyring finds the key for a token's kid: the configured keys first,
// then the fetched key set.
type keyring struct {
	static     map[string]key
	defaultKID string
	jwks       *jwksCache // nil without JWKSURL or Issuer
}

func newKeyring(cfg Config, now func() time.Time) (*keyring, error) {
	kr := &keyring{static: map[string]key{}, defaultKID: cfg.DefaultKey}
	for kid, data := range cfg.SigningKeys {
		k, err := parseSigningKey(kid, data)
		if err != nil {
			return nil, err
		}
		kr.static[kid] = k
	}
	if cfg.JWKSURL != "" || cfg.Issuer != "" {
		if cfg.JWKSURL != "" {
			if err := validURL("jwks_url", cfg.JWKSURL); err != nil {
				return nil, err
			}
		} else if err := validURL("issuer", cfg.Issuer); err != nil {
			return nil, err
		}
		client := cfg.HTTPClient
		if client == nil {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			if cfg.TLS != nil {
				tr.TLSClientConfig = cfg.TLS.Clone()
			}
			client = &http.Client{Transport: tr}
		}
		c := &jwksCache{
			url: cfg.JWKSURL, discovery: strings.TrimSuffix(cfg.Issuer, "/") + discoveryPath(cfg.DiscoveryPath), client: client,
			timeout: cfg.FetchTimeout, minInterval: cfg.RefreshInterval, maxAge: cfg.KeysMaxAge, now: now,
		}
		if c.timeout <= 0 {
			c.timeout = 10 * time.Second
		}
		if c.minInterval <= 0 {
			c.minInterval = 10 * time.Second
		}
		if c.maxAge <= 0 {
			c.maxAge = time.Hour
		}
		kr.jwks = c
	}
	if len(kr.static) == 0 && kr.jwks == nil {
		return nil, errors.New("oauth2: no signing keys: set jwks_url, issuer or signing_keys")
	}
	if kr.defaultKID != "" && kr.jwks == nil {
		if _, ok := kr.static[kr.defaultKID]; !ok {
			return nil, fmt.Errorf("oauth2: default_key %q is not among signing_keys", kr.defaultKID)
		}
	}
	return kr, nil
}

func discoveryPath(p string) string {
	switch {
	case p == "":
		return "/.well-known/openid-configuration"
	case !strings.HasPrefix(p, "/"):
		return "/" + p
	}
	return p
}

// lookup returns the key for kid (default_key when the token names
// none). An unknown kid is a refusal; a key set that could not be fetched
// is an error (undecided).
func (kr *keyring) lookup(ctx context.Context, kid string) (key, error) {
	if kid == "" {
		kid = kr.defaultKID
		if kid == "" {
			return key{}, auth.Refuse("token names no signing key (kid) and no default_key is set")
		}
	}
	if k, ok := kr.static[kid]; ok {
		return k, nil
	}
	if kr.jwks == nil {
		return key{}, auth.Refuse("no signing key %q", kid)
	}
	return kr.jwks.get(ctx, kid)
}

// jwksCache is the key set fetched from the provider. Its fields after
// mu are guarded by mu; at most one fetch runs at a time, started by a
// lookup that needs it and waited for by every lookup meanwhile.
type jwksCache struct {
	url         string
	discovery   string // the issuer's discovery document, used without url
	client      *http.Client
	timeout     time.Duration
	minInterval time.Duration
	maxAge      time.Duration
	now         func() time.Time

	mu        sync.Mutex
	keys      map[string]key
	fetchedAt time.Time     // last fetch that succeeded
	triedAt   time.Time     // last fetch started
	lastErr   error         // why the last fetch failed, nil if it did not
	running   chan struct{} // closed when the fetch under way ends
	fetches   int           // fetches started (tests)
}

// get is jwksCache's lookup: known and fresh keys are answered at once;
// an unknown kid, or keys older than maxAge, start a fetch unless one
// started less than minInterval ago, and the answer waits for it.
func (c *jwksCache) get(ctx context.Context, kid string) (key, error) {
	waited := false
	for {
		now := c.now()
		c.mu.Lock()
		k, found := c.keys[kid]
		fresh := !c.fetchedAt.IsZero() && now.Sub(c.fetchedAt) < c.maxAge
		if found && fresh {
			c.mu.Unlock()
			return k, nil
		}
		if c.running == nil {
			mayFetch := c.triedAt.IsZero() || now.Sub(c.triedAt) >= c.minInterval
			if waited || !mayFetch {
				err := c.lastErr
				c.mu.Unlock()
				switch {
				case found:
					return k, nil // stale, but the provider cannot be asked again yet
				case err != nil:
					return key{}, fmt.Errorf("oauth2: signing key %q unknown and the key set could not be fetched: %w", kid, err)
				}
				return key{}, auth.Refuse("no signing key %q in the key set", kid)
			}
			c.running = make(chan struct{})
			c.triedAt = now
			c.fetches++
			go c.fetch(c.running)
		}
		ch := c.running
		c.mu.Unlock()
		select {
		case <-ch:
			waited = true
		case <-ctx.Done():
			return key{}, fmt.Errorf("oauth2: waiting for the key set: %w", ctx.Err())
		}
	}
}

// fetch runs in its own goroutine, bounded by timeout rather than by any
// one login's context, so a client that gives up does not spoil the
// fetch for the others waiting on it.
func (c *jwksCache) fetch(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	keys, err := c.download(ctx)
	c.mu.Lock()
	if err == nil {
		c.keys, c.fetchedAt, c.lastErr = keys, c.now(), nil
	} else {
		c.lastErr = err
	}
	c.running = nil
	c.mu.Unlock()
	close(done)
}

func (c *jwksCache) download(ctx context.Context) (map[string]key, error) {
	u := c.url
	if u == "" {
		var doc struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := c.getJSON(ctx, c.discovery, &doc); err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		if err := validURL("jwks_uri", doc.JWKSURI); err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		u = doc.JWKSURI
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := c.getJSON(ctx, u, &set); err != nil {
		return nil, err
	}
	keys := make(map[string]key, len(set.Keys))
	for _, raw := range set.Keys {
		// A key of a type go-jose does not know, or one for encryption,
		// is skipped rather than spoiling the whole set.
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(raw); err != nil || jwk.KeyID == "" {
			continue
		}
		k, err := keyFromJWK(jwk, false)
		if err != nil {
			continue
		}
		keys[jwk.KeyID] = k
	}
	return keys, nil
}

func (c *jwksCache) getJSON(ctx context.Context, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxJWKSBytes {
		return fmt.Errorf("GET %s: more than %d bytes", u, maxJWKSBytes)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
