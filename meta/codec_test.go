package meta_test

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// TestRecordsKeepTheirStoredForm holds the record forms of a user and a
// policy to the bytes the stores wrote before User and Policy took
// RabbitMQ's shapes: a data directory written then reads the same, and
// what is written now is what it would have held.
func TestRecordsKeepTheirStoredForm(t *testing.T) {
	stored := base64.StdEncoding.EncodeToString([]byte("sha512:abcd"))
	cases := []struct {
		name   string
		record string
		value  any
		encode func() ([]byte, error)
		decode func([]byte) (any, error)
	}{
		{
			name:   "user",
			record: `{"Name":"guest","PasswordHash":"` + stored + `","Tags":["administrator"]}`,
			value:  meta.User{Name: "guest", PasswordHash: "abcd", HashingAlgorithm: "rabbit_password_hashing_sha512", Tags: meta.UserTags{"administrator"}},
			encode: func() ([]byte, error) {
				return meta.EncodeRecord(meta.User{Name: "guest", PasswordHash: "abcd", HashingAlgorithm: "rabbit_password_hashing_sha512", Tags: meta.UserTags{"administrator"}})
			},
			decode: func(b []byte) (any, error) {
				var u meta.User
				return u, meta.DecodeRecord(b, &u)
			},
		},
		{
			name:   "user without a password",
			record: `{"Name":"nopass","PasswordHash":"","Tags":null}`,
			value:  meta.User{Name: "nopass", HashingAlgorithm: "rabbit_password_hashing_sha256"},
			encode: func() ([]byte, error) { return meta.EncodeRecord(meta.User{Name: "nopass"}) },
			decode: func(b []byte) (any, error) {
				var u meta.User
				return u, meta.DecodeRecord(b, &u)
			},
		},
		{
			name:   "operator policy",
			record: `{"VHost":"/","Name":"cap","Operator":true,"Value":{"pattern":"^q","apply-to":"queues","priority":2,"definition":{"max-length":10}}}`,
			value:  meta.Policy{VHost: "/", Name: "cap", Pattern: "^q", ApplyTo: "queues", Priority: 2, Definition: map[string]any{"max-length": json.Number("10")}},
			encode: func() ([]byte, error) {
				return meta.EncodePolicyRecord(meta.Policy{VHost: "/", Name: "cap", Pattern: "^q", ApplyTo: "queues", Priority: 2, Definition: map[string]any{"max-length": int64(10)}}, true)
			},
			decode: func(b []byte) (any, error) {
				var p meta.Policy
				return p, meta.DecodeRecord(b, &p)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.decode([]byte(tc.record))
			require.NoError(t, err)
			require.Equal(t, tc.value, got)
			b, err := tc.encode()
			require.NoError(t, err)
			require.Equal(t, tc.record, string(b))
		})
	}
}

// TestUserRecordRefusesAPassword: a store keeps hashes; a user carrying
// only a plain password was not hashed by the broker and is refused, as
// is a hashing algorithm nobody knows.
func TestUserRecordRefusesAPassword(t *testing.T) {
	_, err := meta.EncodeRecord(meta.User{Name: "u", Password: "secret"})
	require.ErrorContains(t, err, "not a password")
	_, err = meta.EncodeRecord(meta.User{Name: "u", PasswordHash: "x", HashingAlgorithm: "rot13"})
	require.ErrorContains(t, err, `unknown hashing_algorithm "rot13"`)
}
