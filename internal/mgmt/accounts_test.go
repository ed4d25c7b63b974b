package mgmt_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/amqptest"
)

// The management API authenticates against the same stored accounts as
// AMQP logins: a user added, or deleted, through the Go API is so there at
// once, and the permissions it lists are the ones enforced.
func TestManagementUsesStoredAccounts(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ctx := context.Background()

	status, _, _ := h.Do("GET", "/api/users", "ops", nil)
	require.Equal(t, http.StatusUnauthorized, status, "not a user yet")

	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "ops", Password: "ops", Tags: []string{"administrator"}}))
	require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "ops", VHost: "/", Configure: "^ops-.*", Write: ".*", Read: ""}))
	status, _, body := h.Do("GET", "/api/users", "ops", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var users []definitions.User
	require.NoError(t, json.Unmarshal(body, &users))
	var names []string
	for _, u := range users {
		names = append(names, u.Name)
		require.NotEmpty(t, u.PasswordHash, "hashes, never passwords")
		require.Empty(t, u.Password)
	}
	require.Contains(t, names, "ops")

	status, _, body = h.Do("GET", "/api/permissions/%2F/ops", "ops", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var p definitions.Permission
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, definitions.Permission{User: "ops", VHost: "/", Configure: "^ops-.*", Write: ".*", Read: ""}, p)

	require.NoError(t, b.Admin().DeleteUser(ctx, "ops"))
	status, _, _ = h.Do("GET", "/api/users", "ops", nil)
	require.Equal(t, http.StatusUnauthorized, status, "a deleted user is locked out")
}
