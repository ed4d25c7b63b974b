package broker

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/passwd"
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

// TestStoredHashes: a user imported with each of RabbitMQ's hashing
// algorithms is stored so that its password checks, and userDefinition
// exports the hash and algorithm as they were imported (the hashing itself
// is tested in internal/passwd).
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
			stored, err := passwd.Import(tc.alg, tc.hash)
			require.NoError(t, err)
			require.True(t, passwd.Check(stored, "pw"))
			require.False(t, passwd.Check(stored, "pw2"))
			u := userDefinition(meta.User{Name: "u", PasswordHash: stored})
			require.Equal(t, tc.stored, u.HashingAlgorithm)
			require.Equal(t, tc.hash, u.PasswordHash, "exported as imported")
		})
	}
}
