package amqptest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// API is a client of a management API (or any JSON-over-HTTP handler)
// served by an httptest server. It takes the handler rather than a broker
// so that amqptest need not import the root package.
type API struct {
	tb  testing.TB
	srv *httptest.Server
}

// NewAPI serves h on an httptest server, closed on cleanup, and returns a
// client of it.
func NewAPI(tb testing.TB, h http.Handler) *API {
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return &API{tb: tb, srv: srv}
}

// URL is the base URL of the server, for clients other than Do (a CLI).
func (a *API) URL() string { return a.srv.URL }

// Client is an HTTP client of the server whose idle connections close with
// it, for a test that must read a response as a stream rather than whole.
func (a *API) Client() *http.Client { return a.srv.Client() }

// Do sends a request to path as user (password = user name; "" sends no
// credentials) and returns the status, headers and body. A string body is
// sent as it is, any other non-nil body as its JSON encoding, both with
// Content-Type application/json; nil sends no body. hdr are further
// header name, value pairs.
func (a *API) Do(method, path, user string, body any, hdr ...string) (int, http.Header, []byte) {
	a.tb.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = bytes.NewReader([]byte(s))
		} else {
			enc, err := json.Marshal(body)
			require.NoError(a.tb, err)
			rd = bytes.NewReader(enc)
		}
	}
	req, err := http.NewRequest(method, a.srv.URL+path, rd)
	require.NoError(a.tb, err)
	if user != "" {
		req.SetBasicAuth(user, user)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := a.srv.Client().Do(req)
	require.NoError(a.tb, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(a.tb, err)
	return resp.StatusCode, resp.Header, out
}

// Get fetches path as guest, requires 200 and returns the decoded JSON.
func (a *API) Get(path string) any {
	a.tb.Helper()
	status, _, body := a.Do("GET", path, "guest", nil)
	require.Equal(a.tb, http.StatusOK, status, "GET %s: %s", path, body)
	var v any
	require.NoError(a.tb, json.Unmarshal(body, &v), "GET %s: %s", path, body)
	return v
}

// ErrorBody decodes an error response as RabbitMQ's management API writes
// it, {"error":..,"reason":..}, and returns the two strings.
func ErrorBody(tb testing.TB, body []byte) (errText, reason string) {
	tb.Helper()
	var e struct{ Error, Reason string }
	require.NoError(tb, json.Unmarshal(body, &e), "%s", body)
	return e.Error, e.Reason
}
