// Package testcert makes X.509 certificate authorities and leaf
// certificates at test time, so TLS tests need no files in the repository
// and never expire. Everything is ECDSA P-256, valid from an hour ago to an
// hour from now. It is for tests only; nothing here is safe for production.
package testcert
