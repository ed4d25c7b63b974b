// Package auth is the broker's authentication and authorisation seam, split
// as RabbitMQ 4.x splits its auth backends (rabbit_authn_backend and
// rabbit_authz_backend): an Authenticator turns a login (mechanism, user
// name, secret or client certificate, peer address) into an Identity with
// tags, and an Authorizer decides vhost access, configure/write/read on a
// resource and topic access for that Identity.
//
// A Chain tries its Backends in order, as RabbitMQ's auth_backends.N do,
// and a Backend may take authentication from one implementation and
// authorisation from another (auth_backends.N.authn / .authz). Cache
// remembers allowed decisions for a TTL, as rabbitmq_auth_backend_cache
// does with its default cache_refusals = false. Funcs lets an embedding
// program decide with its own Go functions.
//
// What the package promises: a refusal is an error wrapping ErrRefused
// (with the reason for the log); any other error means the backend could
// not decide (it was down or too slow), which the broker answers as
// "try again" rather than as bad credentials. Every method takes a
// context that the broker bounds with Options.LoginTimeout; an
// implementation must return when it ends; an Authorizer's context
// carries the client's address (PeerFrom) when there is one. Every type
// here is safe for concurrent use when its parts are.
//
// The broker asks the Authorizer of the entry that let a user in at every
// check RabbitMQ makes: vhost access at connection.open, configure, write
// and read on each method that names an exchange or queue, topic access
// on publishes to and bindings of topic exchanges. A connection remembers
// its last allowed answers for a few seconds (a stream of publishes to one
// exchange asks once), refusals never. InternalAuthz (the user database)
// is checked by the broker itself, with no call per check.
package auth
