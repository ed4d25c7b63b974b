// Package access keeps what a user may do on a vhost as open connections
// hold it: one shared *session.Access per (user, vhost), made at
// connection.open (or a direct Channel's open) from the stored grants and
// updated in place when an operator changes them, so that every open
// connection of the user on the vhost sees a change at its next check.
//
// It compiles stored permissions and topic permissions into the grants
// the sessions check, as RabbitMQ's internal backend matches them
// (unanchored; {username} and {vhost} expanded in topic permissions).
// A store that does not answer is reported apart from a refusal, so that
// the caller answers "try again" (320), never 530.
package access
