package oauth2test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"
)

// Issuer serves a JWKS at URL() and signs tokens with its current keys.
// Its keys are ECDSA P-256 (ES256), quick to make under -race.
type Issuer struct {
	t      testing.TB
	srv    *httptest.Server
	hits   atomic.Int32
	mu     sync.Mutex
	keys   map[string]*ecdsa.PrivateKey // every key ever made, by kid
	served []string                     // kids the JWKS serves now
	down   bool
	n      int
}

// NewIssuer starts an Issuer serving one key, kid "key-1"; it stops with
// the test.
func NewIssuer(t testing.TB) *Issuer {
	is := &Issuer{t: t, keys: map[string]*ecdsa.PrivateKey{}}
	is.Rotate()
	is.srv = httptest.NewServer(http.HandlerFunc(is.serve))
	t.Cleanup(is.srv.Close)
	return is
}

// URL is the JWKS endpoint (auth_oauth2.jwks_url).
func (is *Issuer) URL() string { return is.srv.URL + "/jwks" }

// Base is the server's root; its /.well-known/openid-configuration names
// URL as jwks_uri (auth_oauth2.issuer).
func (is *Issuer) Base() string { return is.srv.URL }

// Fetches counts the requests for the key set so far.
func (is *Issuer) Fetches() int { return int(is.hits.Load()) }

// Down makes the endpoints answer 503 (true) or work again (false).
func (is *Issuer) Down(down bool) {
	is.mu.Lock()
	is.down = down
	is.mu.Unlock()
}

// Rotate makes a new key, kid "key-N", serves it alone from now on and
// returns its kid; tokens signed with older keys fail once the backend
// fetches the new set.
func (is *Issuer) Rotate() string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(is.t, err)
	is.mu.Lock()
	defer is.mu.Unlock()
	is.n++
	kid := fmt.Sprintf("key-%d", is.n)
	is.keys[kid] = k
	is.served = []string{kid}
	return kid
}

// Kid is the kid of the key served last.
func (is *Issuer) Kid() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.served[len(is.served)-1]
}

func (is *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	down := is.down
	var set jose.JSONWebKeySet
	for _, kid := range is.served {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &is.keys[kid].PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"})
	}
	is.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/jwks":
		is.hits.Add(1)
		_ = json.NewEncoder(w).Encode(set)
	case "/.well-known/openid-configuration":
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.srv.URL, "jwks_uri": is.URL()})
	default:
		http.NotFound(w, r)
	}
}

// Sign returns a compact JWS of claims signed with the key kid ("" for
// the key served last), the kid in its header unless omitKid.
func (is *Issuer) Sign(claims map[string]any, kid string, omitKid bool) string {
	if kid == "" {
		kid = is.Kid()
	}
	is.mu.Lock()
	k := is.keys[kid]
	is.mu.Unlock()
	require.NotNil(is.t, k, "no key %q", kid)
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if !omitKid {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, opts)
	require.NoError(is.t, err)
	payload, err := json.Marshal(claims)
	require.NoError(is.t, err)
	jws, err := s.Sign(payload)
	require.NoError(is.t, err)
	tok, err := jws.CompactSerialize()
	require.NoError(is.t, err)
	return tok
}

// Claims are typical claims for audience aud and subject sub, expiring
// in ttl, granting scopes (a space-separated scope claim).
func Claims(aud, sub, scopes string, ttl time.Duration) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": "oauth2test", "aud": aud, "sub": sub, "scope": scopes,
		"iat": now.Unix(), "exp": now.Add(ttl).Unix(),
	}
}
