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
// (Config.UpdateSecret) moves that time; one they refuse closes the
// connection with 530 NOT_ALLOWED, RabbitMQ's answer.

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
	ok, expires, err := c.cfg.UpdateSecret(c.user, m.NewSecret, c.tr.Peer().Remote)
	if err != nil {
		return err
	}
	if !ok {
		c.log.Warn("session: new secret refused", "user", LogName(c.user), "reason", LogName(m.Reason))
		return amqp.NewError(amqp.NotAllowed, m.ClassID(), m.MethodID(), "New secret was refused by one of the backends")
	}
	c.credExpires = expires
	c.armCredentialExpiry()
	return nil
}
