package ldap_test

import (
	"context"
	"testing"
	"time"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/ldap"
	"github.com/warrenmq/broker/internal/slapdtest"
)

// BenchmarkLogin: one login (bind as the user, two tag queries) against
// a local slapd over pooled connections, in parallel; cached, the same
// login answered by auth.Cache; vhost, one in_group decision.
func BenchmarkLogin(b *testing.B) {
	s := slapdtest.Start(b, directory)
	lb, err := ldap.New(baseConfig(s))
	if err != nil {
		b.Fatal(err)
	}
	defer lb.Close()
	ctx := context.Background()
	req := auth.Request{Mechanism: "PLAIN", User: "alice", Secret: "alicepw"}
	b.Run("ldap", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := lb.Authenticate(ctx, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(lb.Dials()), "dials")
	})
	b.Run("cached", func(b *testing.B) {
		c := &auth.Cache{Authn: lb, Authz: lb, TTL: time.Hour}
		for b.Loop() {
			if _, err := c.Authenticate(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("vhost", func(b *testing.B) {
		id := auth.Identity{User: "bob"}
		if _, err := lb.Authenticate(ctx, auth.Request{User: "bob", Secret: "bobpw"}); err != nil {
			b.Fatal(err)
		}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, err := lb.VHostAccess(ctx, id, "vh1"); err != nil || !ok {
					b.Error(ok, err)
					return
				}
			}
		})
	})
}
