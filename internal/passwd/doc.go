// Package passwd is the one home of Warren's password hashes: the form
// accounts store (meta.User.PasswordHash), how a login checks a password
// against it, and how RabbitMQ's definitions files carry it.
//
// Stored hashes are RabbitMQ's password_hash (RabbitMQ 4.x,
// rabbit_password_hashing_*): base64(salt ++ H(salt ++ password)) with a
// 4-byte salt. H is SHA-256 (rabbit_password_hashing_sha256, what Hash
// writes) unless the stored hash starts with an algorithm marker: "sha512:"
// for rabbit_password_hashing_sha512, "md5:" for the legacy
// rabbit_password_hashing_md5 (both only come from imported definitions,
// through Import). ':' is not a base64 character, so an unmarked hash is
// always SHA-256: hashes stored before the markers existed read as they
// always did, and SHA-256 hashes stay readable by those older versions. An
// empty hash is a user without a password (RabbitMQ's password_hash ""):
// no password matches it; EXTERNAL logins still work.
//
// Every function is safe for concurrent use.
package passwd
