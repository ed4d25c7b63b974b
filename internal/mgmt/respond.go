package mgmt

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/meta"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteError answers with RabbitMQ's error object,
// {"error": code, "reason": reason}.
func WriteError(w http.ResponseWriter, status int, code, reason string) {
	body, _ := json.Marshal(map[string]string{"error": code, "reason": reason})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func notFound(w http.ResponseWriter) {
	WriteError(w, http.StatusNotFound, "Object Not Found", "Not Found")
}

// writeAMQPError answers a failed AMQP-level operation the way RabbitMQ's
// management plugin does: 404 not_found, 401 not_authorised for access
// refused, 500 for internal errors, 400 bad_request otherwise. The reason is
// the reply text without its "NOT_FOUND - " style prefix.
func writeAMQPError(w http.ResponseWriter, err error) {
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		if errors.Is(err, ErrNotFound) {
			notFound(w)
			return
		}
		WriteError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	reason := ae.Text
	if _, rest, ok := strings.Cut(reason, " - "); ok {
		reason = rest
	}
	switch ae.Code {
	case amqp.NotFound:
		WriteError(w, http.StatusNotFound, "not_found", reason)
	case amqp.AccessRefused:
		WriteError(w, http.StatusUnauthorized, "not_authorised", reason)
	case amqp.InternalError:
		WriteError(w, http.StatusInternalServerError, "internal_server_error", reason)
	default:
		WriteError(w, http.StatusBadRequest, "bad_request", reason)
	}
}

// created answers a PUT or POST: 201 for something new, 204 otherwise, as
// RabbitMQ does.
func created(w http.ResponseWriter, isNew bool) {
	if isNew {
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// noContent answers an operation that returns nothing: 204, or err as
// writeAMQPError answers it.
func noContent(w http.ResponseWriter, err error) {
	if err != nil {
		writeAMQPError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeList answers a listing: a JSON array of items ([] when there are
// none, never null), or err as writeAMQPError answers it.
func writeList[T any](w http.ResponseWriter, items []T, err error) {
	if err != nil {
		writeAMQPError(w, err)
		return
	}
	if items == nil {
		items = []T{}
	}
	writeJSON(w, http.StatusOK, items)
}

// writeChannelError answers a direct Channel that could not be opened as
// RabbitMQ's with_channel answers a refused direct connection: no
// permissions on the vhost is 401 "Access refused.", a user store that
// did not answer 503 (as a login then is), anything else as its AMQP code.
func writeChannelError(w http.ResponseWriter, err error) {
	var e *amqp091.Error
	switch {
	case errors.As(err, &e) && e.Code == amqp091.NotAllowed:
		WriteError(w, http.StatusUnauthorized, "not_authorised", "Access refused.")
	case errors.As(err, &e) && e.Code == amqp091.ConnectionForced:
		WriteError(w, http.StatusServiceUnavailable, "service_unavailable", "cannot authenticate now: the user store did not answer; try again, or another cluster member")
	default:
		writeAMQPError(w, fromAMQP091Error(err))
	}
}

// fromAMQP091Error turns a direct Channel's error back into the
// *amqp.Error writeAMQPError maps to an HTTP status.
func fromAMQP091Error(err error) error {
	var e *amqp091.Error
	if errors.As(err, &e) {
		return &amqp.Error{Code: uint16(e.Code), Text: e.Reason}
	}
	return err
}

// isNotFound reports whether err says the object is missing, in either
// the API's or the meta store's words.
func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, meta.ErrNotFound)
}

// writeAdminError answers a failed account or vhost write: 400 for bad
// input, 404 for a missing object, as writeAMQPError otherwise.
func writeAdminError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrInvalid), errors.Is(err, meta.ErrInvalid):
		WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
	case isNotFound(err):
		notFound(w)
	default:
		writeAMQPError(w, err)
	}
}

// found reports whether a Get found its object: false with no error when
// it is not there, the Get's error when it failed otherwise.
func found[T any](_ T, err error) (bool, error) {
	if err == nil {
		return true, nil
	}
	if isNotFound(err) {
		return false, nil
	}
	return false, err
}
