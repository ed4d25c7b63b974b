package broker

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// rabbitHash is RabbitMQ's password_hash, computed here independently of
// the broker: base64(salt ++ H(salt ++ password)).
func rabbitHash(sum func([]byte) []byte, salt []byte, password string) string {
	in := append(append([]byte(nil), salt...), password...)
	return base64.StdEncoding.EncodeToString(append(append([]byte(nil), salt...), sum(in)...))
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
func sha512Sum(b []byte) []byte { s := sha512.Sum512(b); return s[:] }
func md5Sum(b []byte) []byte    { s := md5.Sum(b); return s[:] }

func TestStoredHashes(t *testing.T) {
	salt := []byte{1, 2, 3, 4}
	for _, tc := range []struct {
		alg, stored string // stored: the algorithm's name as exported
		hash        string
	}{
		{"rabbit_password_hashing_sha256", "rabbit_password_hashing_sha256", rabbitHash(sha256Sum, salt, "pw")},
		{"", "rabbit_password_hashing_sha256", rabbitHash(sha256Sum, salt, "pw")},
		{"rabbit_password_hashing_sha512", "rabbit_password_hashing_sha512", rabbitHash(sha512Sum, salt, "pw")},
		{"rabbit_password_hashing_md5", "rabbit_password_hashing_md5", rabbitHash(md5Sum, salt, "pw")},
	} {
		t.Run(tc.stored+tc.alg, func(t *testing.T) {
			stored, err := storedHash(tc.alg, tc.hash)
			require.NoError(t, err)
			require.True(t, checkPassword(stored, "pw"))
			require.False(t, checkPassword(stored, "pw2"))
			h, b64 := splitStoredHash(stored)
			require.Equal(t, tc.stored, h.name)
			require.Equal(t, tc.hash, string(b64), "exported as imported")
			u := userDefinition(meta.User{Name: "u", PasswordHash: stored})
			require.Equal(t, tc.stored, u.HashingAlgorithm)
			require.Equal(t, tc.hash, u.PasswordHash)
		})
	}
	// SHA-256 hashes are stored unmarked, as before the markers existed:
	// what older versions stored still verifies, and the reverse.
	stored, err := storedHash("rabbit_password_hashing_sha256", rabbitHash(sha256Sum, salt, "pw"))
	require.NoError(t, err)
	require.Equal(t, rabbitHash(sha256Sum, salt, "pw"), string(stored))
	require.True(t, checkPassword(hashPassword("pw"), "pw"))

	// An empty hash is a user without a password.
	stored, err = storedHash("rabbit_password_hashing_sha512", "")
	require.NoError(t, err)
	require.False(t, checkPassword(stored, ""))

	for _, bad := range []struct{ alg, hash, err string }{
		{"rabbit_password_hashing_rot13", rabbitHash(sha256Sum, salt, "pw"), "unknown hashing_algorithm"},
		{"rabbit_password_hashing_sha512", rabbitHash(sha256Sum, salt, "pw"), "sha512 digest"},
		{"rabbit_password_hashing_md5", "!!", "not base64"},
	} {
		_, err := storedHash(bad.alg, bad.hash)
		require.ErrorContains(t, err, bad.err)
	}
	for _, junk := range []string{"sha512:", "md5:!!", "sha512:" + rabbitHash(sha256Sum, salt, "pw"), "sha1:" + rabbitHash(sha256Sum, salt, "pw")} {
		require.False(t, checkPassword([]byte(junk), "pw"), junk)
	}
	// RabbitMQ's documented example: salt 908D C60A, password test12.
	require.Equal(t, "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR", string(encodeHash(sha256.New(), []byte{0x90, 0x8d, 0xc6, 0x0a}, "test12")))
}
