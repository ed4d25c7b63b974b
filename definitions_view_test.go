package broker

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/meta"
)

// TestStoredHashes: a user imported with each of RabbitMQ's hashing
// algorithms is stored (meta.HashedUser) so that its password checks, with
// the hash and algorithm as they were imported (the hashing itself
// is tested in internal/passwd).
func TestStoredHashes(t *testing.T) {
	salt := []byte{1, 2, 3, 4}
	for _, tc := range []struct {
		alg, stored string // stored: the algorithm's name as exported
		hash        string
	}{
		{"rabbit_password_hashing_sha256", "rabbit_password_hashing_sha256", string(passwd.Encode(sha256.New(), salt, "pw"))},
		{"", "rabbit_password_hashing_sha256", string(passwd.Encode(sha256.New(), salt, "pw"))},
		{"rabbit_password_hashing_sha512", "rabbit_password_hashing_sha512", string(passwd.Encode(sha512.New(), salt, "pw"))},
		{"rabbit_password_hashing_md5", "rabbit_password_hashing_md5", string(passwd.Encode(md5.New(), salt, "pw"))},
	} {
		t.Run(tc.stored+tc.alg, func(t *testing.T) {
			stored, err := passwd.Import(tc.alg, tc.hash)
			require.NoError(t, err)
			require.True(t, passwd.Check(stored, "pw"))
			require.False(t, passwd.Check(stored, "pw2"))
			u, err := meta.HashedUser(User{Name: "u", PasswordHash: tc.hash, HashingAlgorithm: tc.alg})
			require.NoError(t, err)
			require.True(t, passwd.CheckExported(u.HashingAlgorithm, u.PasswordHash, "pw"))
			require.Equal(t, tc.stored, u.HashingAlgorithm)
			require.Equal(t, tc.hash, u.PasswordHash, "exported as imported")
		})
	}
}
