package oauth2

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/warrenmq/broker/auth"
)

// Token is what a verified access token grants; it is the Impl of the
// auth.Identity the backend's Authenticate returns, and what its
// Authorizer methods read.
type Token struct {
	// User is the first preferred username claim that is a string
	// ("unknown" when none is, as in RabbitMQ).
	User string
	// Tags are the "tag:<tag>" scopes.
	Tags []string
	// Expires is the exp claim; the token grants nothing from then on.
	Expires time.Time
	// Scopes are the token's scopes for this resource server, its prefix
	// removed, aliases and additional scope sources included, sorted and
	// without duplicates.
	Scopes []string

	grants grants
}

// ParseScopes turns a token's scopes (prefix removed, as in
// Token.Scopes) and its claims (for the {claim} variables) into the
// grants that VHostAccess, ResourceAccess and TopicAccess check.
func ParseScopes(scopes []string, claims map[string]any) *Token {
	return &Token{Scopes: scopes, Tags: tags(scopes), grants: newGrants(scopes, claims)}
}

// VHostAccess reports whether some permission scope names vhost
// (rabbit_oauth2_scope:vhost_access).
func (t *Token) VHostAccess(vhost string) bool { return t.grants.vhost(vhost) }

// ResourceAccess reports whether a scope grants p on r
// (rabbit_oauth2_scope:resource_access).
func (t *Token) ResourceAccess(r auth.Resource, p auth.Permission) bool {
	return t.grants.resource(r, p)
}

// TopicAccess reports whether a scope with a routing-key part grants p
// on topic exchange r for key (rabbit_oauth2_scope:topic_access).
func (t *Token) TopicAccess(r auth.Resource, p auth.Permission, key string) bool {
	return t.grants.topic(r, p, key)
}

// verify checks a raw token (signature, exp, nbf, aud) and reads what it
// grants. A token that fails a check is a refusal; only a key set that
// cannot be fetched is an error.
func (c *compiled) verify(ctx context.Context, raw string) (*Token, error) {
	if len(raw) > c.maxTokenBytes {
		return nil, auth.Refuse("token of %d bytes is longer than %d", len(raw), c.maxTokenBytes)
	}
	if strings.Count(raw, ".") != 2 {
		return nil, auth.Refuse("secret is not a JWT (three dot-separated parts)")
	}
	jws, err := jose.ParseSignedCompact(raw, c.algs)
	if err != nil {
		return nil, auth.Refuse("token is not a usable JWS: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, auth.Refuse("token has %d signatures", len(jws.Signatures))
	}
	h := jws.Signatures[0].Protected
	k, err := c.keys.lookup(ctx, h.KeyID)
	if err != nil {
		return nil, err
	}
	if k.alg != "" && k.alg != h.Algorithm {
		return nil, auth.Refuse("token signed with %s but key %q is for %s", h.Algorithm, h.KeyID, k.alg)
	}
	payload, err := jws.Verify(k.pub)
	if err != nil {
		return nil, auth.Refuse("token signature is invalid")
	}
	claims, err := decodeClaims(payload)
	if err != nil {
		return nil, auth.Refuse("token claims: %v", err)
	}
	return c.check(claims)
}

// decodeClaims reads a JWT payload: one JSON object, numbers kept as
// json.Number.
func decodeClaims(payload []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var claims map[string]any
	if err := d.Decode(&claims); err != nil {
		return nil, err
	}
	if claims == nil {
		return nil, errNotObject
	}
	if d.More() {
		return nil, errTrailing
	}
	return claims, nil
}

type claimsError string

func (e claimsError) Error() string { return string(e) }

const (
	errNotObject = claimsError("payload is not a JSON object")
	errTrailing  = claimsError("payload has data after its JSON object")
)

// check is what RabbitMQ checks of a verified token's claims
// (validate_token_expiry, the audience, normalize_token_scope) and what
// it reads from them.
func (c *compiled) check(claims map[string]any) (*Token, error) {
	now := c.now()
	exp, ok, err := numericDate(claims, "exp")
	switch {
	case err != nil:
		return nil, auth.Refuse("token has an invalid exp claim: %v", err)
	case !ok:
		return nil, auth.Refuse("token has no exp claim")
	case !exp.After(now):
		return nil, auth.Refuse("token expired at %s (checked at %s)", exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	nbf, ok, err := numericDate(claims, "nbf")
	switch {
	case err != nil:
		return nil, auth.Refuse("token has an invalid nbf claim: %v", err)
	case ok && nbf.After(now.Add(c.nbfLeeway)):
		return nil, auth.Refuse("token not valid before %s", nbf.UTC().Format(time.RFC3339))
	}
	if c.verifyAud && !slices.Contains(audiences(claims), c.resourceServerID) {
		return nil, auth.Refuse("token audience does not include %q", c.resourceServerID)
	}
	scopes, err := c.scopes(claims)
	if err != nil {
		return nil, auth.Refuse("%v", err)
	}
	t := ParseScopes(scopes, claims)
	t.User = c.username(claims)
	t.Expires = exp
	return t, nil
}
