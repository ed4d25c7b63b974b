// Package login guards the broker's logins: AMQP logins (PLAIN, AMQPLAIN,
// EXTERNAL) and HTTP basic auth (the management API, the authenticated
// metrics handler) go through the same Guard.
//
//   - The user store is read within a timeout (Guard.Timeout, the broker's
//     Options.LoginTimeout). A clustered member without a raft leader, or
//     still catching up, cannot answer a consistent read at once; a login
//     must not hang until the client's own timeout, which amqp091-go and
//     others then report as bad credentials (403), a failure they treat as
//     permanent. When the store does not answer in time the login fails
//     with ErrUnavailable, which the doors answer with 320
//     CONNECTION_FORCED (the spec's "the client may retry") or HTTP 503,
//     never with 403: the credentials were not checked. (RabbitMQ 4.x
//     turns an auth backend error into a 403 refusal, and its members in a
//     minority stop listening altogether; the first is what this avoids,
//     the second is cluster.Config.PauseAfter.)
//   - Failed logins are throttled per source address (Throttle), not per
//     user name, so an attacker can slow down only itself (and whoever
//     shares its address), never lock a user out. RabbitMQ has no such
//     throttle; it copes with brute force through its auth backends.
//
// A Guard and a Throttle are safe for concurrent use.
package login
