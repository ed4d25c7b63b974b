package mgmt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// Helpers of the operations tests (mgmt_*_test.go), prefixed so they
// never collide with other test files of the package.

// mgmtBroker is a new in-memory broker, closed on cleanup, with the users
// the access tests need.
func mgmtBroker(t *testing.T) *broker.Broker {
	t.Helper()
	b, err := broker.New(broker.Options{Users: []broker.User{
		{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
		{Name: "mon", Password: "mon", Tags: []string{"monitoring"}},
		{Name: "mgr", Password: "mgr", Tags: []string{"management"}},
		{Name: "app", Password: "app"},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// mgmtDial connects amqp091-go as user over b.Dial (a pipe, so WaitIdle
// covers what the client wrote) and closes it on cleanup.
func mgmtDial(t *testing.T, b *broker.Broker, user, name string) *amqp091.Connection {
	t.Helper()
	url := "amqp://" + user + ":" + user + "@127.0.0.1:5672/"
	conn, err := amqp091.DialConfig(url, amqp091.Config{
		Dial:       b.Dial,
		Properties: amqp091.Table{"connection_name": name},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func mgmtIdle(t *testing.T, b *broker.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.WaitIdle(ctx))
}

// mgmtHTTP is a management API client.
type mgmtHTTP struct {
	t   *testing.T
	srv *httptest.Server
}

func mgmtServer(t *testing.T, b *broker.Broker) *mgmtHTTP {
	srv := httptest.NewServer(b.ManagementHandler())
	t.Cleanup(srv.Close)
	return &mgmtHTTP{t: t, srv: srv}
}

// do sends a request as user (password = user name) and returns the
// status, headers and body.
func (h *mgmtHTTP) do(method, path, user string, body any, hdr ...string) (int, http.Header, []byte) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = bytes.NewReader([]byte(s))
		} else {
			enc, err := json.Marshal(body)
			require.NoError(h.t, err)
			rd = bytes.NewReader(enc)
		}
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	require.NoError(h.t, err)
	if user != "" {
		req.SetBasicAuth(user, user)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp.StatusCode, resp.Header, out
}

// get fetches path as guest, requires 200 and decodes the JSON.
func (h *mgmtHTTP) get(path string) any {
	h.t.Helper()
	status, _, body := h.do("GET", path, "guest", nil)
	require.Equal(h.t, http.StatusOK, status, "GET %s: %s", path, body)
	var v any
	require.NoError(h.t, json.Unmarshal(body, &v), "GET %s: %s", path, body)
	return v
}

// errorBody decodes RabbitMQ's {"error":..,"reason":..}.
func errorBody(t *testing.T, body []byte) (string, string) {
	t.Helper()
	var e struct{ Error, Reason string }
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	return e.Error, e.Reason
}
