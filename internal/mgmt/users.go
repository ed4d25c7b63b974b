package mgmt

import (
	"errors"
	"net/http"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/meta"
)

// userRoutes: users, the administrator's (RabbitMQ 3.13/4.x's
// rabbit_mgmt_wm_user and _users), with the status codes vhostRoutes
// describes.
func (m *mgmt) userRoutes() {
	m.handle("GET", "/api/users", administrator, m.users)
	m.handle("GET", "/api/users/{user}", administrator, m.user)
	m.handle("PUT", "/api/users/{user}", administrator, m.putUser)
	m.handle("DELETE", "/api/users/{user}", administrator, m.deleteUser)
}

func (m *mgmt) users(c *mgmtCall) {
	us, err := m.b.ListUsers(c.r.Context())
	writeList(c.w, us, err)
}

func (m *mgmt) user(c *mgmtCall) {
	u, err := m.b.GetUser(c.r.Context(), c.p("user"))
	if err != nil {
		notFound(c.w)
		return
	}
	writeJSON(c.w, http.StatusOK, u)
}

// userBody is PUT /api/users/{user}'s body: password, or password_hash
// with hashing_algorithm (RabbitMQ's names, SHA-256 when left out); with
// neither the user cannot log in with a password. tags is a list or a
// comma-separated string, none when left out. A pointer tells a field
// that is absent from one that is empty.
type userBody struct {
	Password         *string              `json:"password"`
	PasswordHash     *string              `json:"password_hash"`
	HashingAlgorithm string               `json:"hashing_algorithm"`
	Tags             definitions.UserTags `json:"tags"`
}

// putUser is PUT /api/users/{user}: creates (201) or replaces (204) the
// user. Sending both password and password_hash is 400, as
// rabbit_auth_backend_internal:put_user refuses it (RabbitMQ 3.13/4.x).
func (m *mgmt) putUser(c *mgmtCall) {
	var body userBody
	if !readBody(c, &body) {
		return
	}
	if body.Password != nil && body.PasswordHash != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "both_password_and_password_hash_are_provided")
		return
	}
	if !validName(c, "user", c.p("user")) {
		return
	}
	u := definitions.User{Name: c.p("user"), HashingAlgorithm: body.HashingAlgorithm, Tags: body.Tags}
	switch {
	case body.Password != nil:
		u.Password = *body.Password
		u.HashingAlgorithm = ""
	case body.PasswordHash != nil:
		u.PasswordHash = *body.PasswordHash
	}
	had, err := found(m.b.GetUser(c.r.Context(), u.Name))
	if err == nil {
		err = m.b.PutUser(c.r.Context(), u)
	}
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	created(c.w, !had)
}

// deleteUser is DELETE /api/users/{user}: the user, its permissions and
// its open connections go (DeleteUser).
func (m *mgmt) deleteUser(c *mgmtCall) {
	err := m.b.DeleteUser(c.r.Context(), c.p("user"))
	if errors.Is(err, meta.ErrNotFound) {
		notFound(c.w)
		return
	}
	noContent(c.w, err)
}
