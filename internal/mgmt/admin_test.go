package mgmt_test

import (
	"crypto/sha512"
	"encoding/json"
	"net/http"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/passwd"
)

// TestManagementAdminWrites runs the administrator's writes (vhosts,
// users, permissions) through their answers in order: RabbitMQ's 201 for
// something new and 204 for a replacement or a deletion, 400 for a bad
// body, 401 without credentials or without the administrator tag, 404 for
// a missing vhost, user or permission (400 vhost_or_user_not_found for a
// PUT of permissions, as RabbitMQ's).
func TestManagementAdminWrites(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	all := map[string]any{"configure": ".*", "write": ".*", "read": ".*"}

	runAPICases(t, h, []apiCase{
		// Who may: administrator only (RabbitMQ answers 401, not 403).
		{"", "PUT", "/api/vhosts/v1", map[string]any{}, 401, "Login failed"},
		{"mon", "PUT", "/api/vhosts/v1", map[string]any{}, 401, "Not administrator user"},
		{"mgr", "PUT", "/api/users/x", map[string]any{"password": "x"}, 401, "Not administrator user"},
		{"mgr", "PUT", "/api/permissions/%2F/app", all, 401, "Not administrator user"},
		{"mon", "DELETE", "/api/vhosts/%2F", nil, 401, "Not administrator user"},
		{"mon", "GET", "/api/users/app/permissions", nil, 401, "Not administrator user"},
		{"mon", "GET", "/api/vhosts/%2F/permissions", nil, 401, "Not administrator user"},
		{"app", "DELETE", "/api/permissions/%2F/app", nil, 401, "Not management user"},

		// Vhosts.
		{"guest", "PUT", "/api/vhosts/v1", `{"description": "d", "tags": "a,b", "default_queue_type": "quorum"}`, 201, ""},
		{"guest", "PUT", "/api/vhosts/v1", map[string]any{}, 204, ""},
		{"guest", "PUT", "/api/vhosts/v2", "", 201, ""},
		{"guest", "PUT", "/api/vhosts/v3", `{"default_queue_type": "fancy"}`, 400, "unknown queue type 'fancy'"},
		{"guest", "PUT", "/api/vhosts/v3", `{"description": `, 400, "not_json"},
		{"guest", "PUT", "/api/vhosts/v%FF", map[string]any{}, 400, "vhost name must be 1 to 255 bytes of UTF-8"},
		{"guest", "GET", "/api/vhosts/v3", nil, 404, ""},
		{"guest", "DELETE", "/api/vhosts/v2", nil, 204, ""},
		{"guest", "DELETE", "/api/vhosts/v2", nil, 404, ""},
		{"guest", "GET", "/api/vhosts/v2", nil, 404, ""},

		// Users.
		{"guest", "PUT", "/api/users/u1", map[string]any{"password": "pw1", "tags": "management, monitoring"}, 201, ""},
		{"guest", "PUT", "/api/users/u1", map[string]any{"password": "pw1", "tags": []string{"management"}}, 204, ""},
		{"guest", "PUT", "/api/users/u2", map[string]any{"password_hash": "not base64!"}, 400, ""},
		{"guest", "PUT", "/api/users/u2", map[string]any{"password_hash": "", "hashing_algorithm": "rabbit_password_hashing_rot13"}, 400, ""},
		{"guest", "PUT", "/api/users/u2", map[string]any{"password": 5}, 400, "not_json"},
		{"guest", "PUT", "/api/users/u2", map[string]any{"password": "p", "password_hash": ""}, 400, "both_password_and_password_hash_are_provided"},
		{"guest", "PUT", "/api/users/u%FF", map[string]any{"password": "x"}, 400, "user name must be 1 to 255 bytes of UTF-8"},
		{"guest", "GET", "/api/users/u2", nil, 404, ""},
		{"guest", "GET", "/api/users/u2/permissions", nil, 404, ""},
		{"guest", "DELETE", "/api/users/u2", nil, 404, ""},

		// Permissions.
		{"guest", "PUT", "/api/permissions/v1/u1", map[string]any{"configure": "^u1", "write": ".*", "read": ".*"}, 201, ""},
		{"guest", "PUT", "/api/permissions/v1/u1", all, 204, ""},
		{"guest", "PUT", "/api/permissions/v1/u1", map[string]any{"configure": ".*"}, 400, "[{key_missing,write},{key_missing,read}]"},
		{"guest", "PUT", "/api/permissions/v1/u1", map[string]any{"configure": "(", "write": ".*", "read": ".*"}, 400, ""},
		{"guest", "PUT", "/api/permissions/nope/u1", all, 400, "vhost_or_user_not_found"},
		{"guest", "PUT", "/api/permissions/v1/nobody", all, 400, "vhost_or_user_not_found"},
		{"guest", "DELETE", "/api/permissions/v1/app", nil, 404, ""},
		{"guest", "DELETE", "/api/permissions/nope/app", nil, 404, ""},
		{"guest", "GET", "/api/vhosts/nope/permissions", nil, 404, ""},
	})

	// The shapes: a user as RabbitMQ lists it, and permissions per user
	// and per vhost.
	var u definitions.User
	status, _, body := h.Do("GET", "/api/users/u1", "guest", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.NoError(t, json.Unmarshal(body, &u))
	require.Equal(t, "u1", u.Name)
	require.Equal(t, definitions.UserTags{"management"}, u.Tags, "the second PUT replaced the tags")
	require.Equal(t, passwd.SHA256, u.HashingAlgorithm)
	require.NotEmpty(t, u.PasswordHash)

	want := []definitions.Permission{{User: "u1", VHost: "v1", Configure: ".*", Write: ".*", Read: ".*"}}
	for _, path := range []string{"/api/users/u1/permissions", "/api/vhosts/v1/permissions"} {
		status, _, body := h.Do("GET", path, "guest", nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
		var got []definitions.Permission
		require.NoError(t, json.Unmarshal(body, &got))
		require.Equal(t, want, got, path)
	}
	status, _, body = h.Do("GET", "/api/vhosts/v1", "guest", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.JSONEq(t, `"v1"`, string(mustField(t, body, "name")))

	// Deleting: the permission, then the user.
	status, _, _ = h.Do("DELETE", "/api/permissions/v1/u1", "guest", nil)
	require.Equal(t, http.StatusNoContent, status)
	status, _, body = h.Do("GET", "/api/users/u1/permissions", "guest", nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `[]`, string(body))
	status, _, _ = h.Do("DELETE", "/api/users/u1", "guest", nil)
	require.Equal(t, http.StatusNoContent, status)
	status, _, _ = h.Do("GET", "/api/users/u1", "guest", nil)
	require.Equal(t, http.StatusNotFound, status)
}

// mustField returns the raw JSON of an object's field.
func mustField(t *testing.T, body []byte, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), "%s", body)
	require.Contains(t, m, key)
	return m[key]
}

// TestManagementCreatedUserLogsIn: a vhost, user and permissions made over
// HTTP are what AMQP logins and checks use: the user logs in with the
// password (or a password_hash made elsewhere), its permissions are
// enforced, and after DELETE of its permissions it can no longer open the
// vhost.
func TestManagementCreatedUserLogsIn(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	do := func(method, path string, body any, want int) {
		t.Helper()
		status, _, out := h.Do(method, path, "guest", body)
		require.Equal(t, want, status, "%s %s: %s", method, path, out)
	}
	do("PUT", "/api/vhosts/apps", map[string]any{"description": "apps"}, http.StatusCreated)
	do("PUT", "/api/users/alice", map[string]any{"password": "s3cret", "tags": ""}, http.StatusCreated)
	hash := passwd.Encode(sha512.New(), []byte{1, 2, 3, 4}, "hashed")
	do("PUT", "/api/users/bob", map[string]any{"password_hash": string(hash), "hashing_algorithm": passwd.SHA512}, http.StatusCreated)
	perm := map[string]any{"configure": "^alice\\.", "write": "^alice\\.", "read": "^alice\\."}
	do("PUT", "/api/permissions/apps/alice", perm, http.StatusCreated)
	do("PUT", "/api/permissions/apps/bob", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, http.StatusCreated)

	dial := func(url string) (*amqp091.Connection, error) {
		return amqp091.DialConfig(url, amqp091.Config{Dial: b.Dial})
	}
	_, err := dial("amqp://alice:wrong@localhost/apps")
	require.Error(t, err, "a wrong password is refused")

	conn, err := dial("amqp://alice:s3cret@localhost/apps")
	require.NoError(t, err)
	defer conn.Close()
	ch := amqptest.Channel(t, conn)
	_, err = ch.QueueDeclare("alice.q", false, false, false, false, nil)
	require.NoError(t, err, "configure on ^alice\\.")
	_, err = ch.QueueDeclare("other", false, false, false, false, nil)
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, amqp091.AccessRefused, ae.Code, "configure on other is refused")

	bob, err := dial("amqp://bob:hashed@localhost/apps")
	require.NoError(t, err, "a password_hash made elsewhere logs in")
	require.NoError(t, bob.Close())

	do("DELETE", "/api/permissions/apps/alice", nil, http.StatusNoContent)
	_, err = dial("amqp://alice:s3cret@localhost/apps")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, amqp091.NotAllowed, ae.Code, "no permissions on the vhost any more")

	do("DELETE", "/api/vhosts/apps", nil, http.StatusNoContent)
	_, err = dial("amqp://bob:hashed@localhost/apps")
	require.ErrorAs(t, err, &ae)
	require.Equal(t, amqp091.NotAllowed, ae.Code, "the vhost is gone")
}
