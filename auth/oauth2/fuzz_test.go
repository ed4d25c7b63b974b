package oauth2

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/broker/auth"
)

// FuzzScope feeds scope strings and subjects to ParseScope, Match and the
// grants: nothing panics, "*" matches everything, a pattern with no
// wildcard or escapes matches only itself, and a scope grants a resource
// only if it grants its vhost.
func FuzzScope(f *testing.F) {
	for _, s := range [][2]string{
		{"read:*/*", "q"}, {"write:%2F/amq.topic/a.*", "a.b"}, {"configure:{vhost}/q-{sub}", "q-x"},
		{"read:a*b*c/x", "abc"}, {"read:{a.b}/x", "x"}, {"tag:administrator", ""}, {"read:100%/q", "q"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, scope, subject string) {
		if !Match(subject, "*") {
			t.Fatalf("Match(%q, \"*\") is false", subject)
		}
		if !strings.ContainsAny(scope, "*%+") && Match(subject, scope) != (subject == scope) {
			t.Fatalf("Match(%q, %q) disagrees with equality", subject, scope)
		}
		if sc, ok := ParseScope(scope); ok && sc.Permission > auth.Read {
			t.Fatalf("ParseScope(%q) gave permission %v", scope, sc.Permission)
		}
		tok := ParseScopes([]string{scope}, map[string]any{"sub": subject})
		r := auth.Resource{VHost: subject, Kind: "queue", Name: subject}
		for _, p := range []auth.Permission{auth.Configure, auth.Write, auth.Read} {
			if tok.ResourceAccess(r, p) && !tok.VHostAccess(subject) {
				t.Fatalf("%q grants %v on %+v but not the vhost", scope, p, r)
			}
			if tok.TopicAccess(r, p, subject) && !tok.ResourceAccess(r, p) {
				t.Fatalf("%q grants topic %v but not the resource", scope, p)
			}
		}
	})
}

// FuzzToken feeds raw secrets to a backend with a configured key and
// token payloads to the claim checks: nothing panics, every failure is a
// refusal (no fetch can fail here), and accepted claims have an exp in
// the future and the resource server in aud.
func FuzzToken(f *testing.F) {
	f.Add("eyJhbGciOiJub25lIn0.eyJleHAiOjF9.", []byte(`{"exp":99999999999,"aud":"rabbitmq","scope":"rabbitmq.read:*/*"}`))
	f.Add("a.b.c", []byte(`{"exp":1e400}`))
	f.Add("eyJhbGciOiJIUzI1NiIsImtpZCI6ImsifQ.e30.c2ln", []byte(`{"exp":"x","aud":["rabbitmq",1]}`))
	f.Add("", []byte(`{"exp":99999999999,"aud":"rabbitmq","realm_access":{"roles":["rabbitmq.tag:x"]},"nbf":-1}`))
	f.Add("..", []byte(`[]`))
	c, err := Config{
		ResourceServerID:    "rabbitmq",
		AdditionalScopesKey: "realm_access.roles resource_access",
		SigningKeys:         map[string][]byte{"k": []byte(`{"kty":"oct","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA","alg":"HS256"}`)},
		Algorithms:          []string{"HS256", "ES256"},
	}.compile()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string, payload []byte) {
		if _, err := c.verify(context.Background(), raw); err != nil && !errors.Is(err, auth.ErrRefused) {
			t.Fatalf("verify(%q): %v is not a refusal", raw, err)
		}
		claims, err := decodeClaims(payload)
		if err != nil {
			return
		}
		tok, err := c.check(claims)
		if err != nil {
			if !errors.Is(err, auth.ErrRefused) {
				t.Fatalf("check: %v is not a refusal", err)
			}
			return
		}
		if !tok.Expires.After(time.Now()) {
			t.Fatalf("accepted a token expiring at %v", tok.Expires)
		}
		if !slices.Contains(audiences(claims), "rabbitmq") {
			t.Fatalf("accepted %s without the audience", payload)
		}
	})
}
