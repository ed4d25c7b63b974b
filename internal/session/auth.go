package session

import (
	"encoding/binary"
	"strings"

	"github.com/warrenmq/broker/amqp"
)

// mechanisms is the mechanisms field of connection.start: SASL names
// separated by spaces, preferred first (RabbitMQ's order).
const mechanisms = "PLAIN AMQPLAIN"

// credentials extracts user and password from a start-ok response. A
// response that does not parse is a 502 SYNTAX_ERROR, as RabbitMQ answers;
// an unknown mechanism is 503 COMMAND_INVALID (RabbitMQ's
// auth_mechanism_to_module).
func credentials(mechanism, response string) (user, password string, err *amqp.Error) {
	cls, mth := amqp.ClassConnection, amqp.MethodConnectionStartOk
	switch mechanism {
	case "PLAIN":
		// RFC 4616: [authzid] NUL authcid NUL passwd.
		authz, rest, ok := strings.Cut(response, "\x00")
		if !ok {
			return "", "", amqp.NewError(amqp.SyntaxError, cls, mth, "PLAIN response is not [authzid] NUL user NUL password")
		}
		user, password, ok = strings.Cut(rest, "\x00")
		if !ok || strings.Contains(password, "\x00") {
			return "", "", amqp.NewError(amqp.SyntaxError, cls, mth, "PLAIN response is not [authzid] NUL user NUL password")
		}
		// Acting as another identity (authzid) is not supported; naming
		// oneself is harmless.
		if authz != "" && authz != user {
			return "", "", amqp.NewError(amqp.AccessRefused, cls, mth, "PLAIN authorization identity %q is not supported", authz)
		}
		return user, password, nil
	case "AMQPLAIN":
		// The response is a field table without its length prefix (RabbitMQ's
		// rabbit_auth_mechanism_amqplain): LOGIN and PASSWORD long strings.
		buf := make([]byte, 4, 4+len(response))
		binary.BigEndian.PutUint32(buf, uint32(len(response)))
		buf = append(buf, response...)
		t, _, derr := amqp.DecodeTable(buf)
		if derr != nil {
			return "", "", amqp.NewError(amqp.SyntaxError, cls, mth, "AMQPLAIN response is not a field table: %v", derr)
		}
		var okUser, okPass bool
		user, okUser = tableString(t, "LOGIN")
		password, okPass = tableString(t, "PASSWORD")
		if !okUser || !okPass {
			return "", "", amqp.NewError(amqp.SyntaxError, cls, mth, "AMQPLAIN response lacks LOGIN or PASSWORD")
		}
		return user, password, nil
	}
	return "", "", amqp.NewError(amqp.CommandInvalid, cls, mth, "unknown authentication mechanism %q (supported: %s)", mechanism, mechanisms)
}

// tableString reads a string-valued field stored as a long string or bytes.
func tableString(t amqp.Table, key string) (string, bool) {
	switch v := t[key].(type) {
	case string:
		return v, true
	case []byte:
		return string(v), true
	}
	return "", false
}
