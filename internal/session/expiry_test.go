package session

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/vhost"
)

// expiringConfig logs guest in with a credential expiring ttl after
// clk's now; UpdateSecret accepts the secret "good" for another hour,
// refuses "bad" and cannot decide "down". asked counts its calls.
func expiringConfig(clk *clock.Fake, ttl time.Duration, asked *atomic.Int32) *Config {
	cfg := testConfig()
	cfg.Clock = clk
	cfg.Login = func(at *LoginAttempt) (bool, string, error) {
		if at.User != "guest" || at.Password != "guest" {
			return false, "", nil
		}
		if ttl > 0 {
			at.Expires = clk.Now().Add(ttl)
		}
		return true, "", nil
	}
	cfg.UpdateSecret = func(user, secret string, _ net.Addr) (bool, *Authz, time.Time, error) {
		asked.Add(1)
		switch secret {
		case "good":
			return true, nil, clk.Now().Add(time.Hour), nil
		case "down":
			return false, nil, time.Time{}, amqp.NewError(amqp.ConnectionForced, amqp.ClassConnection, amqp.MethodConnectionUpdateSecret, "try again")
		}
		return false, nil, time.Time{}, nil
	}
	return cfg
}

// TestCredentialExpiry: a credential that expires closes its connection
// then with 403 "credential expired"; update-secret with a secret
// UpdateSecret accepts moves the expiry, one it refuses is 530 NOT_ALLOWED,
// one it cannot check closes with its error; a credential that does not
// expire never asks UpdateSecret.
func TestCredentialExpiry(t *testing.T) {
	t.Run("expires", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(1_000_000, 0))
		var asked atomic.Int32
		p := startPeer(t, expiringConfig(clk, time.Minute, &asked))
		p.Handshake()
		p.OpenChannel(1)
		clk.Advance(time.Minute)
		cl := p.ExpectClose(amqp.AccessRefused)
		require.Contains(t, cl.ReplyText, "credential expired")
	})
	t.Run("refreshed", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(1_000_000, 0))
		var asked atomic.Int32
		p := startPeer(t, expiringConfig(clk, time.Minute, &asked))
		p.Handshake()
		p.SendMethod(0, &amqp.ConnectionUpdateSecret{NewSecret: "good", Reason: "refresh"})
		_, ok := p.ExpectMethod(0).(*amqp.ConnectionUpdateSecretOk)
		require.True(t, ok)
		require.Equal(t, int32(1), asked.Load())
		clk.Advance(30 * time.Minute) // past the first expiry, before the new one
		p.OpenChannel(1)
		clk.Advance(30 * time.Minute)
		p.ExpectClose(amqp.AccessRefused)
	})
	for _, tc := range []struct {
		secret string
		code   uint16
	}{{"bad", amqp.NotAllowed}, {"down", amqp.ConnectionForced}} {
		t.Run("update "+tc.secret, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			var asked atomic.Int32
			p := startPeer(t, expiringConfig(clk, time.Minute, &asked))
			p.Handshake()
			p.SendMethod(0, &amqp.ConnectionUpdateSecret{NewSecret: tc.secret, Reason: "refresh"})
			p.ExpectClose(tc.code)
		})
	}
	t.Run("never expires", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(1_000_000, 0))
		var asked atomic.Int32
		p := startPeer(t, expiringConfig(clk, 0, &asked))
		p.Handshake()
		p.SendMethod(0, &amqp.ConnectionUpdateSecret{NewSecret: "bad", Reason: "refresh"})
		_, ok := p.ExpectMethod(0).(*amqp.ConnectionUpdateSecretOk)
		require.True(t, ok, "a credential that does not expire is not re-checked")
		require.Zero(t, asked.Load())
		require.Zero(t, clk.Pending(), "no expiry timer")
	})
}

// TestUpdateSecretSwapsAuthz: an accepted update-secret makes the new
// credential's Authz decide (swapAuthz): a queue.declare the old identity
// was allowed, and that the connection's cache answered, is asked again
// and refused under the new one; a new credential whose permissions would
// come from the user database is refused with 530.
func TestUpdateSecretSwapsAuthz(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var asked atomic.Int32
	authz := func(token string) *Authz {
		return &Authz{
			Authorizer: auth.Funcs{Resource: func(_ context.Context, id auth.Identity, _ auth.Resource, _ auth.Permission) (bool, error) {
				asked.Add(1)
				return id.Impl == "A", nil
			}},
			Identity: auth.Identity{User: "guest", Impl: token},
			Backend:  "test",
			Timeout:  time.Second,
		}
	}
	cfg := testConfig()
	vh := testVHost(t)
	cfg.VHost = func(name string) (*vhost.VHost, bool) { return vh, name == "/" }
	cfg.Clock = clk
	cfg.Login = func(at *LoginAttempt) (bool, string, error) {
		at.Expires = clk.Now().Add(time.Hour)
		at.Authz = authz("A")
		return true, "", nil
	}
	cfg.Open = func(_, vhost string, z *Authz) (*Access, func(), error) {
		return NewAuthzAccess(vhost, z), func() {}, nil
	}
	cfg.UpdateSecret = func(_, secret string, _ net.Addr) (bool, *Authz, time.Time, error) {
		if secret == "internal" {
			return true, nil, clk.Now().Add(time.Hour), nil
		}
		return true, authz(secret), clk.Now().Add(time.Hour), nil
	}
	p := startPeer(t, cfg)
	p.Handshake()
	p.OpenChannel(1)
	declare := &amqp.QueueDeclare{Queue: "q", Exclusive: true}
	for range 2 {
		p.SendMethod(1, declare)
		_, ok := p.ExpectMethod(1).(*amqp.QueueDeclareOk)
		require.True(t, ok)
	}
	require.Equal(t, int32(1), asked.Load(), "the second declare is answered from the cache")

	p.SendMethod(0, &amqp.ConnectionUpdateSecret{NewSecret: "B", Reason: "refresh"})
	_, ok := p.ExpectMethod(0).(*amqp.ConnectionUpdateSecretOk)
	require.True(t, ok)
	p.SendMethod(1, declare)
	cl, ok := p.ExpectMethod(1).(*amqp.ChannelClose)
	require.True(t, ok)
	require.Equal(t, amqp.AccessRefused, cl.ReplyCode, cl.ReplyText)
	require.Equal(t, int32(2), asked.Load(), "the new identity is asked")

	p.SendMethod(0, &amqp.ConnectionUpdateSecret{NewSecret: "internal", Reason: "refresh"})
	require.Contains(t, p.ExpectClose(amqp.NotAllowed).ReplyText, "New secret was refused")
}
