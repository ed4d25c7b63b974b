package session

import (
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
)

// A credential that expires (an OAuth 2 token: Config.Login sets
// LoginAttempt.Expires) closes its connection when it expires, with 403
// ACCESS_REFUSED "credential expired", as RabbitMQ 4.x's readers do once
// the expiry timer of rabbit_access_control:expiry_timestamp fires.
// connection.update-secret with a new credential the backends accept
// (Config.UpdateSecret) moves that time and makes the new credential's
// identity decide the connection's permissions; one they refuse closes
// the connection with 530 NOT_ALLOWED, RabbitMQ's answer.

func (c *Conn) clock() clock.Clock {
	if c.cfg.Clock != nil {
		return c.cfg.Clock
	}
	return clock.Real
}

// armCredentialExpiry (re)starts the timer for credExpires.
func (c *Conn) armCredentialExpiry() {
	c.stopCredentialExpiry()
	if c.credExpires.IsZero() {
		return
	}
	at, user := c.credExpires, c.user
	c.credExpiry = c.clock().AfterFunc(at.Sub(c.clock().Now()), func() {
		c.log.Info("session: credential expired, closing connection", "user", LogName(user), "expired", at.UTC())
		c.Shutdown(amqp.AccessRefused, "credential expired")
	})
}

func (c *Conn) stopCredentialExpiry() {
	if c.credExpiry != nil {
		c.credExpiry.Stop()
		c.credExpiry = nil
	}
}

// checkNewSecret checks update-secret's new secret when the connection's
// credential expires, and moves the expiry to the new credential's. It
// returns the error that closes the connection when the secret is refused
// or cannot be checked.
func (c *Conn) checkNewSecret(m *amqp.ConnectionUpdateSecret) error {
	if c.credExpires.IsZero() || c.cfg.UpdateSecret == nil {
		return nil
	}
	ok, z, expires, err := c.cfg.UpdateSecret(c.user, m.NewSecret, c.tr.Peer().Remote)
	if err != nil {
		return err
	}
	if ok && !c.swapAuthz(z) {
		c.log.Warn("session: new secret refused: its permissions would come from the user database, not the backend the connection logged in with", "user", LogName(c.user))
		ok = false
	}
	if !ok {
		c.log.Warn("session: new secret refused", "user", LogName(c.user), "reason", LogName(m.Reason))
		return amqp.NewError(amqp.NotAllowed, m.ClassID(), m.MethodID(), "New secret was refused by one of the backends")
	}
	c.credExpires = expires
	c.armCredentialExpiry()
	return nil
}

// swapAuthz makes z, the accepted new credential's, decide the
// connection's permissions from the next check on, and forgets the
// decisions the old credential's identity was allowed: a token refreshed
// with fewer scopes loses what it lost at once, one with more gains it.
// RabbitMQ 4.x's reader hands the refreshed user to every channel
// (rabbit_channel:update_user_state), which clears its permission cache.
// It reports false when z is nil but the connection's Access is decided by
// an Authorizer: the Access cannot become the user database's here.
func (c *Conn) swapAuthz(z *Authz) bool {
	if c.authz == nil {
		return true // the user database decides, and goes on deciding
	}
	if z == nil {
		return false
	}
	c.authz = z
	if c.access != nil && c.access.authz != nil {
		c.access = NewAuthzAccess(c.access.vhost, z)
	}
	c.decided = nil
	return true
}
