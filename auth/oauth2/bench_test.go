package oauth2_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/oauth2"
	"github.com/warrenmq/broker/auth/oauth2/oauth2test"
)

// BenchmarkAuthenticate is one login with a cached key: parse, ES256
// verify, claims and scopes.
func BenchmarkAuthenticate(b *testing.B) {
	is := oauth2test.NewIssuer(b)
	be, err := oauth2.New(oauth2.Config{ResourceServerID: "rabbitmq", JWKSURL: is.URL()})
	if err != nil {
		b.Fatal(err)
	}
	tok := is.Sign(oauth2test.Claims("rabbitmq", "alice", "rabbitmq.read:*/* rabbitmq.write:prod/app-* rabbitmq.tag:monitoring", time.Hour), "", false)
	req := login(tok)
	if _, err := be.Authenticate(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := be.Authenticate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResourceAccess is one permission decision against a token
// with 50 scopes, the granting one last.
func BenchmarkResourceAccess(b *testing.B) {
	scopes := make([]string, 0, 50)
	for i := range 49 {
		scopes = append(scopes, fmt.Sprintf("read:vh%d/q-%d-*", i, i))
	}
	scopes = append(scopes, "write:prod/orders.*")
	tok := oauth2.ParseScopes(scopes, nil)
	r := auth.Resource{VHost: "prod", Kind: "exchange", Name: "orders.eu"}
	b.ReportAllocs()
	for b.Loop() {
		if !tok.ResourceAccess(r, auth.Write) {
			b.Fatal("not granted")
		}
	}
}
