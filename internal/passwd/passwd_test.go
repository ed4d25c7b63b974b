package passwd

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHashIsRabbitSHA256: Hash writes RabbitMQ's
// rabbit_password_hashing_sha256 form with a fresh salt each time, and
// Check accepts the password and nothing else.
func TestHashIsRabbitSHA256(t *testing.T) {
	h := Hash("s3cret")
	raw, err := base64.StdEncoding.DecodeString(string(h))
	require.NoError(t, err)
	require.Len(t, raw, SaltLen+sha256.Size)
	sum := sha256.Sum256(append(append([]byte(nil), raw[:SaltLen]...), "s3cret"...))
	require.Equal(t, sum[:], raw[SaltLen:], "hash = salt ++ sha256(salt ++ password)")
	require.NotContains(t, string(h), "s3cret")
	require.NotEqual(t, h, Hash("s3cret"), "each hash has its own salt")

	for _, tc := range []struct {
		name     string
		hash     []byte
		password string
		want     bool
	}{
		{"right", h, "s3cret", true},
		{"wrong", h, "s3cret ", false},
		{"blank password, as RabbitMQ refuses it", Hash(""), "", false},
		{"not base64", []byte("!!!"), "s3cret", false},
		{"short", []byte("AAAA"), "", false},
		{"nil", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Check(tc.hash, tc.password))
		})
	}
}

// rabbitHash is RabbitMQ's password_hash of password with salt, built
// independently of Encode. It is the only such copy: other packages'
// tests build hashes with Encode, which this file checks.
func rabbitHash(sum func([]byte) []byte, salt []byte, password string) string {
	return base64.StdEncoding.EncodeToString(append(append([]byte(nil), salt...), sum(append(append([]byte(nil), salt...), password...))...))
}

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
func sha512Sum(b []byte) []byte { s := sha512.Sum512(b); return s[:] }
func md5Sum(b []byte) []byte    { s := md5.Sum(b); return s[:] }

// TestImportExport: each of RabbitMQ's algorithms imports, checks and
// exports as it was imported; SHA-256 hashes are stored unmarked.
func TestImportExport(t *testing.T) {
	salt := []byte{1, 2, 3, 4}
	for _, tc := range []struct{ alg, stored, hash string }{
		{SHA256, SHA256, rabbitHash(sha256Sum, salt, "pw")},
		{"", SHA256, rabbitHash(sha256Sum, salt, "pw")},
		{SHA512, SHA512, rabbitHash(sha512Sum, salt, "pw")},
		{MD5, MD5, rabbitHash(md5Sum, salt, "pw")},
	} {
		t.Run(tc.stored+tc.alg, func(t *testing.T) {
			stored, err := Import(tc.alg, tc.hash)
			require.NoError(t, err)
			require.True(t, Check(stored, "pw"))
			require.False(t, Check(stored, "pw2"))
			alg, hash := Export(stored)
			require.Equal(t, tc.stored, alg)
			require.Equal(t, tc.hash, hash, "exported as imported")
		})
	}
	// SHA-256 hashes are stored unmarked, as before the markers existed:
	// what older versions stored still verifies, and the reverse.
	stored, err := Import(SHA256, rabbitHash(sha256Sum, salt, "pw"))
	require.NoError(t, err)
	require.Equal(t, rabbitHash(sha256Sum, salt, "pw"), string(stored))
	require.True(t, Check(Hash("pw"), "pw"))

	// An empty hash is a user without a password.
	stored, err = Import(SHA512, "")
	require.NoError(t, err)
	require.False(t, Check(stored, ""))

	for _, bad := range []struct{ alg, hash, err string }{
		{"rabbit_password_hashing_rot13", rabbitHash(sha256Sum, salt, "pw"), "unknown hashing_algorithm"},
		{SHA512, rabbitHash(sha256Sum, salt, "pw"), "sha512 digest"},
		{MD5, "!!", "not base64"},
	} {
		_, err := Import(bad.alg, bad.hash)
		require.ErrorContains(t, err, bad.err)
	}
	for _, junk := range []string{"sha512:", "md5:!!", "sha512:" + rabbitHash(sha256Sum, salt, "pw"), "sha1:" + rabbitHash(sha256Sum, salt, "pw")} {
		require.False(t, Check([]byte(junk), "pw"), junk)
	}
	// RabbitMQ's documented example: salt 908D C60A, password test12.
	require.Equal(t, "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR", string(Encode(sha256.New(), []byte{0x90, 0x8d, 0xc6, 0x0a}, "test12")))
}
