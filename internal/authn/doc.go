// Package authn decides who logs in, through every door that takes a
// password, a certificate or a user name: AMQP over TCP and Dial, the
// management API's and the metrics handler's basic auth, a direct
// Channel opened as a user, and update-secret on a connection whose
// credential expires.
//
// Without a configured chain the user database decides (the stored
// password hash, EXTERNAL by the user's existence, RabbitMQ's
// loopback_users rule for guest). With one, its backends are tried in
// order (RabbitMQ's auth_backends.N), auth.Internal standing for the
// user database, and the entry that let a user in decides the user's
// permissions (a *session.Authz; nil when the stored grants decide).
//
// Every login waits out the source's throttle first (internal/login) and
// is bounded by the login timeout, also against a backend that ignores
// its context. A refusal counts against the source; a store or backend
// that does not answer does not, and is answered 320 CONNECTION_FORCED
// ("try again"), never 403 or 530.
package authn
