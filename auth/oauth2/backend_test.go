package oauth2_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/oauth2"
	"github.com/warrenmq/broker/auth/oauth2/oauth2test"
)

// clock is a settable Config.Now.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}
func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }
func login(tok string) auth.Request {
	return auth.Request{Mechanism: "PLAIN", User: "ignored", Secret: tok}
}
func b64(v any) string { j, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(j) }
func newBackend(t *testing.T, cfg oauth2.Config) *oauth2.Backend {
	t.Helper()
	b, err := oauth2.New(cfg)
	require.NoError(t, err)
	return b
}

// TestAuthenticate logs in with tokens from a local JWKS endpoint: valid
// ones become an Identity (user from sub, tags from tag scopes, exp), and
// every token RabbitMQ refuses is a refusal wrapping auth.ErrRefused.
func TestAuthenticate(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	b := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL()})
	good := oauth2test.Claims("rabbitmq", "alice", "rabbitmq.read:*/* rabbitmq.tag:monitoring other.write:*/*", time.Hour)
	with := func(k string, v any) map[string]any {
		c := oauth2test.Claims("rabbitmq", "alice", "rabbitmq.read:*/*", time.Hour)
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	valid := is.Sign(good, "", false)
	parts := strings.Split(valid, ".")
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	otherSigner, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: other},
		(&jose.SignerOptions{}).WithHeader("kid", is.Kid()))
	require.NoError(t, err)
	forged, err := otherSigner.Sign([]byte(parts[1][:0] + mustJSON(good)))
	require.NoError(t, err)
	forgedTok, err := forged.CompactSerialize()
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		mech   string
		tok    string
		refuse string // "" means accepted
	}{
		{name: "valid", tok: valid},
		{name: "aud list", tok: is.Sign(with("aud", []string{"x", "rabbitmq"}), "", false)},
		{name: "expired", tok: is.Sign(with("exp", time.Now().Add(-time.Second).Unix()), "", false), refuse: "expired"},
		{name: "no exp", tok: is.Sign(with("exp", nil), "", false), refuse: "no exp"},
		{name: "exp not a number", tok: is.Sign(with("exp", "soon"), "", false), refuse: "invalid exp"},
		{name: "not yet valid", tok: is.Sign(with("nbf", time.Now().Add(time.Hour).Unix()), "", false), refuse: "not valid before"},
		{name: "wrong audience", tok: is.Sign(with("aud", "other"), "", false), refuse: "audience"},
		{name: "no audience", tok: is.Sign(with("aud", nil), "", false), refuse: "audience"},
		{name: "tampered payload", tok: parts[0] + "." + b64(with("sub", "root")) + "." + parts[2], refuse: "signature"},
		{name: "tampered signature", tok: parts[0] + "." + parts[1] + "." + flip(parts[2]), refuse: "signature"},
		{name: "signed by another key under the kid", tok: forgedTok, refuse: "signature"},
		{name: "alg none", tok: b64(map[string]string{"alg": "none", "kid": is.Kid()}) + "." + parts[1] + ".", refuse: "JWS"},
		{name: "alg HS256 (algorithm confusion)", tok: hmacWithPublicKey(t, is, good), refuse: "JWS"},
		{name: "oversize", tok: valid + strings.Repeat("A", 40<<10), refuse: "longer than"},
		{name: "not a JWT", tok: "hunter2", refuse: "not a JWT"},
		{name: "JWE-shaped", tok: "a.b.c.d.e", refuse: "not a JWT"},
		{name: "unknown kid", tok: b64(map[string]string{"alg": "ES256", "kid": "nope"}) + "." + parts[1] + "." + parts[2], refuse: "no signing key"},
		{name: "no kid, no default_key", tok: is.Sign(good, "", true), refuse: "no default_key"},
		{name: "EXTERNAL", mech: "EXTERNAL", tok: valid, refuse: "client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := login(tc.tok)
			if tc.mech != "" {
				req.Mechanism = tc.mech
			}
			id, err := b.Authenticate(context.Background(), req)
			if tc.refuse != "" {
				require.ErrorIs(t, err, auth.ErrRefused)
				require.ErrorContains(t, err, tc.refuse)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "alice", id.User, "the user name comes from sub, not the request")
			require.WithinDuration(t, time.Now().Add(time.Hour), id.Expires, time.Minute)
			tok, ok := id.Impl.(*oauth2.Token)
			require.True(t, ok)
			require.Contains(t, tok.Scopes, "read:*/*")
		})
	}
	id, err := b.Authenticate(context.Background(), login(valid))
	require.NoError(t, err)
	require.Equal(t, []string{"monitoring"}, id.Tags)
	require.Equal(t, []string{"read:*/*", "tag:monitoring"}, id.Impl.(*oauth2.Token).Scopes, "other resource servers' scopes are dropped")

	hs := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL(), Algorithms: []string{"ES256", "HS256"}})
	_, err = hs.Authenticate(context.Background(), login(hmacWithPublicKey(t, is, good)))
	require.ErrorIs(t, err, auth.ErrRefused, "HS256 listed still never checks against a public key")
	require.ErrorContains(t, err, "is for ES256", "the JWK's alg pins its algorithm")

	skip := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL(), SkipAudienceCheck: true})
	_, err = skip.Authenticate(context.Background(), login(is.Sign(with("aud", "other"), "", false)))
	require.NoError(t, err, "verify_aud = false accepts another audience")
}

func mustJSON(v any) string { j, _ := json.Marshal(v); return string(j) }

// flip changes one character in the middle of a base64url string.
func flip(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// hmacWithPublicKey is the algorithm-confusion forgery: HS256 under the
// kid of the provider's public key, keyed with bytes anyone can have
// (here a made-up secret; the public key's encoding in a real attack).
func hmacWithPublicKey(t *testing.T, is *oauth2test.Issuer, claims map[string]any) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("not-a-secret-of-the-provider-0123456789")},
		(&jose.SignerOptions{}).WithHeader("kid", is.Kid()))
	require.NoError(t, err)
	jws, err := s.Sign([]byte(mustJSON(claims)))
	require.NoError(t, err)
	tok, err := jws.CompactSerialize()
	require.NoError(t, err)
	return tok
}

// TestKeyRotation: an unknown kid fetches the key set again, so a token
// signed with a rotated-in key logs in; a token with a made-up kid within
// RefreshInterval of the last fetch is refused without another fetch, and
// after it fetches once more; keys older than KeysMaxAge are fetched
// again, so the rotated-out key stops working.
func TestKeyRotation(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	clk := newClock()
	b := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL(), Now: clk.now,
		RefreshInterval: time.Minute, KeysMaxAge: time.Hour})
	claims := oauth2test.Claims("rabbitmq", "alice", "rabbitmq.read:*/*", 24*time.Hour)
	ctx := context.Background()

	first := is.Sign(claims, "", false)
	_, err := b.Authenticate(ctx, login(first))
	require.NoError(t, err)
	require.Equal(t, 1, is.Fetches())
	_, err = b.Authenticate(ctx, login(first))
	require.NoError(t, err)
	require.Equal(t, 1, is.Fetches(), "a known kid is answered from the cache")

	clk.add(2 * time.Minute)
	oldKid := is.Kid()
	is.Rotate()
	_, err = b.Authenticate(ctx, login(is.Sign(claims, "", false)))
	require.NoError(t, err, "the rotated-in kid is fetched")
	require.Equal(t, 2, is.Fetches())
	_, err = b.Authenticate(ctx, login(first))
	require.ErrorIs(t, err, auth.ErrRefused, "a fetched set replaces the keys: the rotated-out key is gone, as in RabbitMQ")
	require.Equal(t, 2, is.Fetches(), "within RefreshInterval the unknown kid is not fetched again")

	made := is.Sign(claims, oldKid, false)
	bogus := strings.Replace(made, strings.Split(made, ".")[0], b64(map[string]string{"alg": "ES256", "kid": "made-up"}), 1)
	for range 5 {
		_, err = b.Authenticate(ctx, login(bogus))
		require.ErrorIs(t, err, auth.ErrRefused)
	}
	require.Equal(t, 2, is.Fetches(), "made-up kids within RefreshInterval do not fetch")
	clk.add(2 * time.Minute)
	_, err = b.Authenticate(ctx, login(bogus))
	require.ErrorIs(t, err, auth.ErrRefused)
	require.Equal(t, 3, is.Fetches(), "after RefreshInterval an unknown kid fetches once more")

	// A key the provider withdraws without a new kid being used is
	// dropped when the cached set ages out.
	current := is.Sign(claims, "", false)
	_, err = b.Authenticate(ctx, login(current))
	require.NoError(t, err)
	is.Rotate()
	clk.add(30 * time.Minute)
	_, err = b.Authenticate(ctx, login(current))
	require.NoError(t, err, "within KeysMaxAge the cached key answers")
	require.Equal(t, 3, is.Fetches())
	clk.add(time.Hour)
	_, err = b.Authenticate(ctx, login(current))
	require.ErrorIs(t, err, auth.ErrRefused, "after KeysMaxAge the set is fetched again and the withdrawn key is gone")
	require.Equal(t, 4, is.Fetches())
}

// TestKeySetDown: a key set that cannot be fetched leaves a login
// undecided (an error that is not a refusal, so the broker answers "try
// again"), and the keys fetched before keep working past KeysMaxAge.
func TestKeySetDown(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	clk := newClock()
	b := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL(), Now: clk.now, KeysMaxAge: time.Hour})
	tok := is.Sign(oauth2test.Claims("rabbitmq", "alice", "", 24*time.Hour), "", false)
	ctx := context.Background()

	is.Down(true)
	_, err := b.Authenticate(ctx, login(tok))
	require.Error(t, err)
	require.NotErrorIs(t, err, auth.ErrRefused)
	require.ErrorContains(t, err, "503")

	is.Down(false)
	clk.add(time.Minute)
	_, err = b.Authenticate(ctx, login(tok))
	require.NoError(t, err)

	is.Down(true)
	clk.add(2 * time.Hour)
	_, err = b.Authenticate(ctx, login(tok))
	require.NoError(t, err, "a failed refetch keeps the keys it had")
}

// TestConcurrentUnknownKid: many logins naming a new kid at once share
// one fetch (run under -race).
func TestConcurrentUnknownKid(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	b := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL()})
	tok := is.Sign(oauth2test.Claims("rabbitmq", "alice", "", time.Hour), "", false)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			_, err := b.Authenticate(context.Background(), login(tok))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 1, is.Fetches())
}

// TestDiscovery: with only auth_oauth2.issuer, jwks_uri is read from the
// provider's openid-configuration.
func TestDiscovery(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	b := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", Issuer: is.Base() + "/"})
	_, err := b.Authenticate(context.Background(), login(is.Sign(oauth2test.Claims("rabbitmq", "a", "", time.Hour), "", false)))
	require.NoError(t, err)
	require.Equal(t, 1, is.Fetches())
}

// TestSigningKeys: configured keys (auth_oauth2.signing_keys) as a PEM
// public key, a PEM certificate (RSA) and an HMAC JWK; default_key checks
// tokens without a kid; HS256 is accepted only when listed in
// Algorithms.
func TestSigningKeys(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	secret := []byte("0123456789abcdef0123456789abcdef")
	octJWK, err := json.Marshal(jose.JSONWebKey{Key: secret, KeyID: "hmac", Algorithm: "HS256"})
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idp"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
	ecJWK, err := json.Marshal(jose.JSONWebKey{Key: &ec.PublicKey, KeyID: "ec-jwk"}) // no alg
	require.NoError(t, err)
	keys := map[string][]byte{"pem": pemKey, "hmac": octJWK, "cert": certPEM, "ec-jwk": ecJWK}
	claims := oauth2test.Claims("rabbitmq", "svc", "rabbitmq.configure:*/*", time.Hour)
	sign := func(alg jose.SignatureAlgorithm, k any, kid string) string {
		opts := &jose.SignerOptions{}
		if kid != "" {
			opts = opts.WithHeader("kid", kid)
		}
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: k}, opts)
		require.NoError(t, err)
		jws, err := s.Sign([]byte(mustJSON(claims)))
		require.NoError(t, err)
		tok, err := jws.CompactSerialize()
		require.NoError(t, err)
		return tok
	}
	asym := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", SigningKeys: keys, DefaultKey: "pem"})
	withHS := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", SigningKeys: keys, Algorithms: []string{"ES256", "HS256"}})
	for _, tc := range []struct {
		name string
		b    *oauth2.Backend
		tok  string
		ok   bool
	}{
		{"pem by kid", asym, sign(jose.ES256, ec, "pem"), true},
		{"certificate, RS256", asym, sign(jose.RS256, rsaKey, "cert"), true},
		{"certificate, PS256", asym, sign(jose.PS256, rsaKey, "cert"), true},
		{"key of another kid", asym, sign(jose.ES256, ec, "cert"), false},
		{"pem as default_key", asym, sign(jose.ES256, ec, ""), true},
		{"hmac not in default algorithms", asym, sign(jose.HS256, secret, "hmac"), false},
		{"hmac listed", withHS, sign(jose.HS256, secret, "hmac"), true},
		{"ES256 by an alg-less JWK", withHS, sign(jose.ES256, ec, "ec-jwk"), true},
		{"hmac under an alg-less public JWK", withHS, sign(jose.HS256, secret, "ec-jwk"), false},
		{"hmac under a PEM public key", withHS, sign(jose.HS256, secret, "pem"), false},
		{"hmac with a wrong secret", withHS, sign(jose.HS256, []byte("not-the-secret-not-the-secret-xx"), "hmac"), false},
		{"no kid without default_key", withHS, sign(jose.ES256, ec, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := tc.b.Authenticate(context.Background(), login(tc.tok))
			if !tc.ok {
				require.ErrorIs(t, err, auth.ErrRefused)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "svc", id.User)
		})
	}
}

// TestNewErrors: a Config New cannot use is an error naming the key.
func TestNewErrors(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	for _, tc := range []struct {
		name string
		cfg  oauth2.Config
		want string
	}{
		{"no resource server", oauth2.Config{JWKSURL: "https://idp/jwks"}, "resource_server_id"},
		{"no keys", oauth2.Config{ResourceServerID: "r"}, "no signing keys"},
		{"bad url", oauth2.Config{ResourceServerID: "r", JWKSURL: "ftp://x"}, "jwks_url"},
		{"bad key", oauth2.Config{ResourceServerID: "r", SigningKeys: map[string][]byte{"k": []byte("junk")}}, `signing key "k"`},
		{"bad algorithm", oauth2.Config{ResourceServerID: "r", JWKSURL: "https://idp/jwks", Algorithms: []string{"none"}}, `"none"`},
		{"default_key unknown", oauth2.Config{ResourceServerID: "r", SigningKeys: map[string][]byte{"k": pemKey}, DefaultKey: "x"}, "default_key"},
		{"private key", oauth2.Config{ResourceServerID: "r", SigningKeys: map[string][]byte{"k": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}})}}, "not a public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := oauth2.New(tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestUsernameClaims: preferred_username_claims are tried first, then
// sub and client_id, then "unknown" (RabbitMQ's username_from).
func TestUsernameClaims(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	b := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL(), PreferredUsernameClaims: []string{"user_name", "email"}})
	for _, tc := range []struct {
		name string
		set  map[string]any
		want string
	}{
		{"first preferred", map[string]any{"user_name": "bob", "email": "b@x", "sub": "s"}, "bob"},
		{"second preferred", map[string]any{"user_name": 7, "email": "b@x", "sub": "s"}, "b@x"},
		{"sub", map[string]any{"sub": "s", "client_id": "c"}, "s"},
		{"client_id", map[string]any{"client_id": "c"}, "c"},
		{"none", map[string]any{}, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := oauth2test.Claims("rabbitmq", "", "", time.Hour)
			delete(c, "sub")
			for k, v := range tc.set {
				c[k] = v
			}
			id, err := b.Authenticate(context.Background(), login(is.Sign(c, "", false)))
			require.NoError(t, err)
			require.Equal(t, tc.want, id.User)
		})
	}
}

// TestRefresh is update_state: a new valid token for the same user
// replaces the scopes and expiry; another user's, or an invalid one, is
// refused.
func TestRefresh(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	b := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL()})
	ctx := context.Background()
	id, err := b.Authenticate(ctx, login(is.Sign(oauth2test.Claims("rabbitmq", "alice", "rabbitmq.read:*/*", time.Minute), "", false)))
	require.NoError(t, err)
	next, err := b.Refresh(ctx, id, is.Sign(oauth2test.Claims("rabbitmq", "alice", "rabbitmq.write:*/*", time.Hour), "", false))
	require.NoError(t, err)
	require.True(t, next.Expires.After(id.Expires))
	ok, err := b.ResourceAccess(ctx, next, auth.Resource{VHost: "/", Kind: "exchange", Name: "x"}, auth.Write)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.ResourceAccess(ctx, next, auth.Resource{VHost: "/", Kind: "queue", Name: "q"}, auth.Read)
	require.NoError(t, err)
	require.False(t, ok, "the new token's scopes replace the old ones")

	_, err = b.Refresh(ctx, id, is.Sign(oauth2test.Claims("rabbitmq", "mallory", "rabbitmq.write:*/*", time.Hour), "", false))
	require.ErrorIs(t, err, auth.ErrRefused)
	require.ErrorContains(t, err, "change username")
	_, err = b.Refresh(ctx, id, is.Sign(oauth2test.Claims("rabbitmq", "alice", "", -time.Minute), "", false))
	require.ErrorIs(t, err, auth.ErrRefused)
}

// TestAuthorizerExpiry: once exp passes, the Authorizer allows nothing,
// and an Identity from another backend is allowed nothing.
func TestAuthorizerExpiry(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	clk := newClock()
	b := newBackend(t, oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL(), Now: clk.now})
	ctx := context.Background()
	id, err := b.Authenticate(ctx, login(is.Sign(oauth2test.Claims("rabbitmq", "alice", "rabbitmq.read:*/*", time.Minute), "", false)))
	require.NoError(t, err)
	ok, err := b.VHostAccess(ctx, id, "/")
	require.NoError(t, err)
	require.True(t, ok)
	clk.add(2 * time.Minute)
	ok, err = b.VHostAccess(ctx, id, "/")
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = b.VHostAccess(ctx, auth.Identity{User: "alice"}, "/")
	require.NoError(t, err)
	require.False(t, ok)
}
