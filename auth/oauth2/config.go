package oauth2

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Config is the backend's configuration; each field names the
// rabbitmq.conf key (RabbitMQ 4.x, auth_oauth2.*) it stands for. Only
// ResourceServerID and a key source (JWKSURL, Issuer or SigningKeys) are
// required.
type Config struct {
	// ResourceServerID is auth_oauth2.resource_server_id: the audience
	// tokens must carry and, with a dot, the default scope prefix.
	ResourceServerID string
	// ScopePrefix is auth_oauth2.scope_prefix; empty means
	// ResourceServerID + ".". Scopes without it are ignored.
	ScopePrefix string
	// EmptyScopePrefix is auth_oauth2.scope_prefix = '': every scope
	// counts, none has a prefix removed (ScopePrefix is then ignored).
	EmptyScopePrefix bool
	// SkipAudienceCheck is auth_oauth2.verify_aud = false: accept tokens
	// whose aud does not name ResourceServerID.
	SkipAudienceCheck bool
	// AdditionalScopesKey is auth_oauth2.additional_scopes_key
	// (extra_scopes_source in advanced.config): space-separated claim
	// paths, dotted for nested claims ("realm_access.roles"), whose
	// values add scopes.
	AdditionalScopesKey string
	// PreferredUsernameClaims is auth_oauth2.preferred_username_claims.N:
	// claims tried in order for the user name, before sub and client_id.
	PreferredUsernameClaims []string
	// ScopeAliases is auth_oauth2.scope_aliases.<alias> = <scopes>: a
	// scope in the token named alias also grants the scopes listed (each
	// written with the prefix, as in the token).
	ScopeAliases map[string][]string

	// JWKSURL is auth_oauth2.jwks_url: where the signing keys are
	// fetched (and fetched again when a token names an unknown kid).
	JWKSURL string
	// Issuer is auth_oauth2.issuer: when JWKSURL is empty, jwks_uri is
	// read from Issuer + DiscoveryPath.
	Issuer string
	// DiscoveryPath is auth_oauth2.discovery_endpoint_path; empty means
	// "/.well-known/openid-configuration".
	DiscoveryPath string
	// DefaultKey is auth_oauth2.default_key: the kid of the key that
	// checks tokens whose header names none.
	DefaultKey string
	// SigningKeys is auth_oauth2.signing_keys.<kid> = <file>, each value
	// the file's content: a PEM public key or certificate, or a JWK in
	// JSON (which may be a symmetric "oct" key for HS256).
	SigningKeys map[string][]byte
	// Algorithms is auth_oauth2.algorithms.N: the "alg" values accepted.
	// Empty means every asymmetric algorithm (RS*, PS*, ES*, EdDSA); an
	// HMAC algorithm must be listed to be accepted. "none" never is.
	Algorithms []string

	// TLS is used to fetch JWKSURL and the discovery document
	// (auth_oauth2.https.cacertfile, .peer_verification and the like
	// become its RootCAs and InsecureSkipVerify). Nil: the system roots.
	TLS *tls.Config
	// HTTPClient, when set, fetches instead (TLS is then ignored).
	HTTPClient *http.Client
	// FetchTimeout bounds one fetch of the key set; 0 means 10s.
	FetchTimeout time.Duration
	// RefreshInterval is the least time between two fetches of the key
	// set, so tokens naming made-up kids cannot make the broker hammer the
	// identity provider; 0 means 10s. Within it an unknown kid is refused.
	RefreshInterval time.Duration
	// KeysMaxAge is how long fetched keys are trusted before the next
	// login fetches them again (so a key the provider withdrew stops
	// being accepted); 0 means 1h. A failed fetch keeps the old keys.
	KeysMaxAge time.Duration
	// MaxTokenBytes refuses longer secrets before parsing them; 0 means
	// 32 KiB.
	MaxTokenBytes int
	// NotBeforeLeeway is how far in the future a token's nbf may be
	// (clock skew with the provider); 0 means one minute. RabbitMQ does
	// not read nbf; Warren refuses a token used before it.
	NotBeforeLeeway time.Duration
	// Now, when set, replaces time.Now (tests).
	Now func() time.Time
}

// defaultAlgorithms are accepted when Config.Algorithms is empty.
var defaultAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

var knownAlgorithms = map[string]jose.SignatureAlgorithm{
	"RS256": jose.RS256, "RS384": jose.RS384, "RS512": jose.RS512,
	"PS256": jose.PS256, "PS384": jose.PS384, "PS512": jose.PS512,
	"ES256": jose.ES256, "ES384": jose.ES384, "ES512": jose.ES512,
	"EdDSA": jose.EdDSA,
	"HS256": jose.HS256, "HS384": jose.HS384, "HS512": jose.HS512,
}

// compiled is a Config checked and with its defaults in place.
type compiled struct {
	resourceServerID string
	scopePrefix      string
	verifyAud        bool
	extraPaths       [][]string
	usernameClaims   []string
	aliases          map[string][]string
	algs             []jose.SignatureAlgorithm
	maxTokenBytes    int
	nbfLeeway        time.Duration
	now              func() time.Time
	keys             *keyring
}

func (cfg Config) compile() (*compiled, error) {
	if cfg.ResourceServerID == "" {
		return nil, errors.New("oauth2: resource_server_id is required")
	}
	c := &compiled{
		resourceServerID: cfg.ResourceServerID,
		scopePrefix:      cfg.ScopePrefix,
		verifyAud:        !cfg.SkipAudienceCheck,
		maxTokenBytes:    cfg.MaxTokenBytes,
		nbfLeeway:        cfg.NotBeforeLeeway,
		now:              cfg.Now,
	}
	switch {
	case cfg.EmptyScopePrefix:
		c.scopePrefix = ""
	case c.scopePrefix == "":
		c.scopePrefix = cfg.ResourceServerID + "."
	}
	if c.maxTokenBytes <= 0 {
		c.maxTokenBytes = 32 << 10
	}
	if c.nbfLeeway <= 0 {
		c.nbfLeeway = time.Minute
	}
	if c.now == nil {
		c.now = time.Now
	}
	for _, p := range splitSpaces(cfg.AdditionalScopesKey) {
		c.extraPaths = append(c.extraPaths, splitPath(p))
	}
	c.usernameClaims = append(append([]string(nil), cfg.PreferredUsernameClaims...), defaultUsernameClaims...)
	if len(cfg.ScopeAliases) > 0 {
		c.aliases = make(map[string][]string, len(cfg.ScopeAliases))
		for k, v := range cfg.ScopeAliases {
			c.aliases[k] = append([]string(nil), v...)
		}
	}
	if len(cfg.Algorithms) == 0 {
		c.algs = defaultAlgorithms
	}
	for _, a := range cfg.Algorithms {
		alg, ok := knownAlgorithms[a]
		if !ok {
			return nil, fmt.Errorf("oauth2: algorithm %q is not supported", a)
		}
		c.algs = append(c.algs, alg)
	}
	kr, err := newKeyring(cfg, c.now)
	if err != nil {
		return nil, err
	}
	c.keys = kr
	return c, nil
}

// parseSigningKey reads one auth_oauth2.signing_keys value: a PEM public
// key or certificate, or a JWK.
func parseSigningKey(kid string, data []byte) (key, error) {
	if s := strings.TrimSpace(string(data)); strings.HasPrefix(s, "{") {
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON([]byte(s)); err != nil {
			return key{}, fmt.Errorf("oauth2: signing key %q: %w", kid, err)
		}
		return keyFromJWK(jwk, true)
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		return key{}, fmt.Errorf("oauth2: signing key %q: neither PEM nor a JWK", kid)
	}
	switch blk.Type {
	case "PUBLIC KEY":
		pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return key{}, fmt.Errorf("oauth2: signing key %q: %w", kid, err)
		}
		return key{pub: pub}, nil
	case "RSA PUBLIC KEY":
		pub, err := x509.ParsePKCS1PublicKey(blk.Bytes)
		if err != nil {
			return key{}, fmt.Errorf("oauth2: signing key %q: %w", kid, err)
		}
		return key{pub: pub}, nil
	case "CERTIFICATE":
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return key{}, fmt.Errorf("oauth2: signing key %q: %w", kid, err)
		}
		return key{pub: cert.PublicKey}, nil
	}
	return key{}, fmt.Errorf("oauth2: signing key %q: PEM block %q is not a public key or certificate", kid, blk.Type)
}

// keyFromJWK turns a JWK into a verification key: its public half, or
// for a configured (never a fetched) "oct" key the secret itself. A key
// meant for encryption ("use": "enc") is not one.
func keyFromJWK(jwk jose.JSONWebKey, allowSymmetric bool) (key, error) {
	if jwk.Use != "" && jwk.Use != "sig" {
		return key{}, fmt.Errorf("oauth2: key %q is for %q, not signatures", jwk.KeyID, jwk.Use)
	}
	if b, ok := jwk.Key.([]byte); ok {
		if !allowSymmetric {
			return key{}, fmt.Errorf("oauth2: key %q is symmetric", jwk.KeyID)
		}
		return key{pub: b, alg: jwk.Algorithm}, nil
	}
	pub := jwk.Public()
	if !pub.Valid() {
		return key{}, fmt.Errorf("oauth2: key %q is not a usable public key", jwk.KeyID)
	}
	return key{pub: pub.Key, alg: jwk.Algorithm}, nil
}

func validURL(name, s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("oauth2: %s %q is not an http(s) URL", name, s)
	}
	return nil
}
