package mgmt

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
)

// tableArg converts a request body's arguments to an AMQP table, answering
// 400 bad_request when they do not convert.
func tableArg(c *mgmtCall, args map[string]any) (amqp.Table, bool) {
	t, err := definitions.JSONTable(args)
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", err.Error())
		return nil, false
	}
	return t, true
}

// Request body bounds. An object's body (a queue's or exchange's
// arguments, a binding, a get request) is small: its arguments must fit
// one frame anyway (internal/vhost limits.go), and JSON of a few hundred
// KiB covers any that do. Definitions of a large broker are bigger.
const (
	mgmtMaxBody            = 1 << 20
	mgmtMaxDefinitionsBody = 64 << 20
)

// readBody decodes a JSON request body of at most mgmtMaxBody bytes into
// v; an empty body is {}.
func readBody(c *mgmtCall, v any) bool { return readBodyMax(c, v, mgmtMaxBody) }

// readBodyMax is readBody with the bound max: a longer body is 413 and is
// not read further.
func readBodyMax(c *mgmtCall, v any, max int64) bool {
	return decodeBody(c, http.MaxBytesReader(c.w, c.r.Body, max), v, max)
}

// decodeBody decodes JSON from body, a reader of the request's body
// bounded by max, into v, answering 413 or 400 when it fails.
func decodeBody(c *mgmtCall, body io.Reader, v any, max int64) bool {
	err := definitions.DecodeJSON(body, v)
	if err == nil || errors.Is(err, io.EOF) {
		return true // an empty body is {}
	}
	if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		WriteError(c.w, http.StatusRequestEntityTooLarge, "bad_request", fmt.Sprintf("request body larger than %d bytes", max))
		return false
	}
	WriteError(c.w, http.StatusBadRequest, "bad_request", "not_json")
	return false
}

// flexBool is a JSON boolean that also accepts "true" and "false" as
// strings: rabbitmqadmin sends its flags that way, and RabbitMQ takes them.
type flexBool bool

func (f *flexBool) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true", `"true"`:
		*f = true
	case "false", `"false"`, "null":
		*f = false
	default:
		return fmt.Errorf("mgmt: %s is not a boolean", b)
	}
	return nil
}

// flexInt is a JSON integer that also accepts a numeric string, as
// rabbitmqadmin sends "count".
type flexInt int

func (f *flexInt) UnmarshalJSON(b []byte) error {
	n, err := strconv.Atoi(strings.Trim(string(b), `"`))
	if err != nil {
		return fmt.Errorf("mgmt: %s is not an integer", b)
	}
	*f = flexInt(n)
	return nil
}

// validName answers 400 unless name can travel in AMQP's
// connection.open or a PLAIN login: 1 to 255 bytes of UTF-8.
func validName(c *mgmtCall, kind, name string) bool {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) {
		WriteError(c.w, http.StatusBadRequest, "bad_request", kind+" name must be 1 to 255 bytes of UTF-8")
		return false
	}
	return true
}

// vhostParam returns the vhost a path names, or answers 404 when there is
// none and 401 when the user may not see it (access.go).
func (m *mgmt) vhostParam(c *mgmtCall) (string, bool) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok || c.p("vhost") == "" {
		WriteError(c.w, http.StatusNotFound, "not_found", "vhost_not_found")
		return "", false
	}
	if !m.visible(c, vh) {
		WriteError(c.w, http.StatusUnauthorized, "not_authorised", "User not authorised to access virtual host")
		return "", false
	}
	return vh, true
}

// vhostsParam returns every vhost the user may see, or the one the path
// names.
func (m *mgmt) vhostsParam(c *mgmtCall) ([]string, bool) {
	if !c.has("vhost") {
		return m.visibleVHosts(c), true
	}
	vh, ok := m.vhostParam(c)
	if !ok {
		return nil, false
	}
	return []string{vh}, true
}

// exchangeName maps RabbitMQ's URL name of the default exchange.
func exchangeName(s string) string {
	if s == "amq.default" {
		return ""
	}
	return s
}

// bodyKey is a request body key and whether the body has it.
type bodyKey struct {
	name string
	set  bool
}

// refuseMissing answers 400 with RabbitMQ's "[{key_missing,k},...]" when
// any of keys is not set, naming each in order, and reports whether it
// answered.
func refuseMissing(w http.ResponseWriter, keys ...bodyKey) bool {
	var missing []string
	for _, k := range keys {
		if !k.set {
			missing = append(missing, "{key_missing,"+k.name+"}")
		}
	}
	if len(missing) == 0 {
		return false
	}
	WriteError(w, http.StatusBadRequest, "bad_request", "["+strings.Join(missing, ",")+"]")
	return true
}

func (m *mgmt) node() string { return m.b.NodeName() }
