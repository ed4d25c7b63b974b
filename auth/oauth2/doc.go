// Package oauth2 is RabbitMQ's OAuth 2.0 backend
// (rabbitmq_auth_backend_oauth2, as of RabbitMQ 4.2) for the broker's
// auth seam: a JWT access token is the password, and its scopes are the
// permissions.
//
// A Backend, made by New from a Config whose fields are RabbitMQ's
// auth_oauth2.* settings, is an auth.Authenticator and an
// auth.Authorizer (Backend.Entry is the Chain entry). Authenticate
// ignores the user name and checks the secret as a token: a JWS signed
// with an accepted algorithm (never "none") by a key found by its kid
// among the configured signing_keys or in the key set fetched from
// jwks_url (or the issuer's discovery document), an exp in the future,
// an nbf not in the future, and the resource server id in aud unless
// verify_aud is off. The Identity it returns is named by the first
// preferred username claim, tagged by the token's tag:<tag> scopes, and
// carries the expiry (Identity.Expires) and the *Token
// (Identity.Impl) whose scopes the Authorizer methods read.
//
// Scopes are gathered as RabbitMQ gathers them (the scope claim, the
// additional_scopes_key claim paths, a Keycloak Requesting Party Token,
// scope aliases), kept only when they carry the scope prefix
// (<resource_server_id>. by default), which is removed. A scope
// "read:<vhost>/<name>" (or write, configure) grants that permission,
// "read:<vhost>/<exchange>/<routing key>" topic access too, any
// permission scope the vhost, with Match's wildcards and {vhost} /
// {claim} variables.
//
// What it promises: a token that fails any check is a refusal wrapping
// auth.ErrRefused, whose text says why; only a key set that cannot be
// fetched is another error ("try again"). The key set is fetched by
// the first login that needs it, again when a token names an unknown kid
// (at most once per RefreshInterval, however many logins ask) and when
// it is older than KeysMaxAge; one fetch runs at a time and a login
// waits for it only as long as its context allows. A Backend is safe for
// concurrent use.
package oauth2
