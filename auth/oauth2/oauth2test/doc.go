// Package oauth2test is a test identity provider for the oauth2 backend:
// an httptest JWKS endpoint serving the public halves of keys it makes,
// and a signer of JWTs with those keys. It is for tests only.
//
// It promises only what tests need: an Issuer is safe for concurrent use,
// its server stops when the test ends, and Fetches counts the key-set
// requests, so tests can check when the backend fetched.
package oauth2test
