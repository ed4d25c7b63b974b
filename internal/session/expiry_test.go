package session

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
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
	cfg.UpdateSecret = func(user, secret string, _ net.Addr) (bool, time.Time, error) {
		asked.Add(1)
		switch secret {
		case "good":
			return true, clk.Now().Add(time.Hour), nil
		case "down":
			return false, time.Time{}, amqp.NewError(amqp.ConnectionForced, amqp.ClassConnection, amqp.MethodConnectionUpdateSecret, "try again")
		}
		return false, time.Time{}, nil
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
