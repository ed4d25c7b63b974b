package passwd

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"slices"
)

// Hashing algorithm names as RabbitMQ's definitions files write them
// (hashing_algorithm).
const (
	SHA256 = "rabbit_password_hashing_sha256"
	SHA512 = "rabbit_password_hashing_sha512"
	MD5    = "rabbit_password_hashing_md5"
)

// SaltLen is the salt length of RabbitMQ's password hashes.
const SaltLen = 4

// algorithm is one of RabbitMQ's hashing algorithms.
type algorithm struct {
	name   string // RabbitMQ's module name, as definitions carry it
	marker string // the stored hash's prefix; "" for SHA-256
	new    func() hash.Hash
}

var algorithms = []algorithm{
	{SHA256, "", sha256.New},
	{SHA512, "sha512:", sha512.New},
	{MD5, "md5:", md5.New},
}

// named finds an algorithm by RabbitMQ's name; "" is SHA-256, RabbitMQ's
// default since 3.6 and what definitions files without the key mean.
func named(name string) (algorithm, bool) {
	if name == "" {
		name = SHA256
	}
	for _, a := range algorithms {
		if a.name == name {
			return a, true
		}
	}
	return algorithm{}, false
}

// split returns a stored hash's algorithm and its base64 part.
func split(stored []byte) (algorithm, []byte) {
	for _, a := range algorithms[1:] {
		if rest, ok := bytes.CutPrefix(stored, []byte(a.marker)); ok {
			return a, rest
		}
	}
	return algorithms[0], stored
}

// Hash returns the stored form of password: RabbitMQ's
// rabbit_password_hashing_sha256, base64(salt ++ SHA-256(salt ++
// password)) with a random 4-byte salt, the password_hash RabbitMQ's
// definitions carry.
func Hash(password string) []byte {
	var salt [SaltLen]byte
	_, _ = rand.Read(salt[:]) // crypto/rand.Read never fails (Go 1.24+)
	return Encode(sha256.New(), salt[:], password)
}

// Encode returns base64(salt ++ h(salt ++ password)), the hash Hash
// stores, for a given salt and algorithm; h must be fresh. Tests use it to
// build RabbitMQ's documented examples.
func Encode(h hash.Hash, salt []byte, password string) []byte {
	h.Write(salt)
	h.Write([]byte(password))
	raw := h.Sum(slices.Clip(salt))
	out := make([]byte, base64.StdEncoding.EncodedLen(len(raw)))
	base64.StdEncoding.Encode(out, raw)
	return out
}

// Check reports whether password matches a stored hash (any of the
// algorithms), in constant time for a given hash. A blank password never
// matches: RabbitMQ's internal backend refuses blank passwords
// (rabbit_auth_backend_internal:user_login_authentication), whatever was
// hashed.
func Check(stored []byte, password string) bool {
	if password == "" {
		return false
	}
	a, b64 := split(stored)
	h := a.new()
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Decode(raw, b64)
	if err != nil || n != SaltLen+h.Size() {
		return false
	}
	want := Encode(h, slices.Clone(raw[:SaltLen]), password)
	return subtle.ConstantTimeCompare(want, b64) == 1
}

// Import validates a definitions file's password_hash made with the
// algorithm named algorithm ("" is SHA-256) and returns the form to store
// ("" stays empty: a user without a password). The error names the
// field at fault and no package: callers report it inside their own
// message about the user.
func Import(algorithm, passwordHash string) ([]byte, error) {
	a, ok := named(algorithm)
	if !ok {
		return nil, fmt.Errorf("unknown hashing_algorithm %q", algorithm)
	}
	if passwordHash == "" {
		return []byte{}, nil
	}
	raw, err := base64.StdEncoding.DecodeString(passwordHash)
	if err != nil || len(raw) != SaltLen+a.new().Size() {
		return nil, fmt.Errorf("password_hash is not base64 of a %d-byte salt and a %s digest", SaltLen, a.name)
	}
	return []byte(a.marker + passwordHash), nil
}

// Export is Import reversed: a stored hash as a definitions file carries
// it, its hashing_algorithm and its password_hash.
func Export(stored []byte) (algorithm, passwordHash string) {
	a, b64 := split(stored)
	return a.name, string(b64)
}

// Join is Export reversed for a hash already checked: the stored form of
// passwordHash under the algorithm named algorithm ("" is SHA-256),
// without Import's checks of the hash; false for an algorithm it does not
// know.
func Join(algorithm, passwordHash string) ([]byte, bool) {
	a, ok := named(algorithm)
	if !ok {
		return nil, false
	}
	return []byte(a.marker + passwordHash), true
}

// CheckExported is Check for a hash as a definitions file carries it:
// its hashing_algorithm and its password_hash (a stored user's fields).
func CheckExported(algorithm, passwordHash, password string) bool {
	stored, ok := Join(algorithm, passwordHash)
	return ok && Check(stored, password)
}
