package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/console"
	"github.com/warrenmq/broker/internal/queueargs"
)

// fakeAPI answers every request 401 with a basic-auth challenge, as the
// management API answers a request without credentials.
var fakeAPI = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, `{"error":"not_authorized","reason":"Login failed","path":"`+r.URL.Path+`"}`)
})

func do(t *testing.T, h http.Handler, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return string(b)
}

// TestConsoleServesPageAndAssets: "/" is the page with its security
// headers, assets are under /console/ with a content ETag (304 when it
// matches), and an unknown asset is 404.
func TestConsoleServesPageAndAssets(t *testing.T) {
	h := console.Handler(fakeAPI)
	for _, tc := range []struct{ path, ctype string }{
		{"/", "text/html"}, {"/index.html", "text/html"},
		{"/console/app.js", "javascript"}, {"/console/args.js", "javascript"}, {"/console/app.css", "text/css"}, {"/console/favicon.svg", "image/svg+xml"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := do(t, h, "GET", tc.path)
			require.Equal(t, http.StatusOK, r.StatusCode)
			require.Contains(t, r.Header.Get("Content-Type"), tc.ctype)
			require.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"))
			etag := r.Header.Get("ETag")
			require.NotEmpty(t, etag)
			require.NotEmpty(t, body(t, r))
			r = do(t, h, "GET", tc.path, "If-None-Match", etag)
			require.Equal(t, http.StatusNotModified, r.StatusCode)
		})
	}
	r := do(t, h, "GET", "/")
	require.Contains(t, r.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, "DENY", r.Header.Get("X-Frame-Options"))
	require.Equal(t, http.StatusNotFound, do(t, h, "GET", "/console/nope.js").StatusCode)
	require.Equal(t, http.StatusMethodNotAllowed, do(t, h, "POST", "/").StatusCode)
}

// TestConsolePassesAPIThrough: every other path goes to the API
// unchanged, except that the page's own calls (X-Requested-With) get no
// basic-auth challenge, so the browser shows the page's login form.
func TestConsolePassesAPIThrough(t *testing.T) {
	h := console.Handler(fakeAPI)
	for _, path := range []string{"/api/overview", "/api/queues/%2F/q", "/other"} {
		r := do(t, h, "GET", path)
		require.Equal(t, http.StatusUnauthorized, r.StatusCode)
		require.NotEmpty(t, r.Header.Get("WWW-Authenticate"), path)
		require.Contains(t, body(t, r), "Login failed")

		r = do(t, h, "GET", path, "X-Requested-With", "XMLHttpRequest")
		require.Equal(t, http.StatusUnauthorized, r.StatusCode)
		require.Empty(t, r.Header.Get("WWW-Authenticate"), path)
		require.Contains(t, body(t, r), "Login failed")
	}
}

// TestConsoleTestIDs: the page carries the data-testid attributes that
// tests (the project's and its users') drive it by; docs/console.md
// lists them, and renaming one breaks those tests.
func TestConsoleTestIDs(t *testing.T) {
	h := console.Handler(fakeAPI)
	page := body(t, do(t, h, "GET", "/")) + body(t, do(t, h, "GET", "/console/app.js"))
	for _, id := range []string{
		"login-username", "login-password", "login-submit", "login-error",
		"nav-overview", "nav-queues", "nav-exchanges", "nav-connections", "nav-channels",
		"nav-vhosts", "nav-users", "nav-permissions", "nav-policies", "logout", "whoami",
		"queue-row", "queue-ready", "queue-unacked",
		"publish-body", "publish-submit", "get-submit", "get-result", "get-ackmode", "get-payload",
		"queue-purge", "queue-delete", "unacked-row", "access-denied", "chart-nodata",
		"connection-row", "connection-close", "channel-row", "exchange-row",
		"nav-shovels", "nav-federation", "move-dest-queue", "move-dest-uri", "move-progress",
		"shovel-row", "shovel-forwarded", "shovel-remaining", "shovel-restart", "shovel-delete",
		"federation-link-row", "federation-restart",
	} {
		require.True(t, strings.Contains(page, `data-testid="`+id+`"`) || strings.Contains(page, `'`+id+`'`),
			"data-testid %q is missing", id)
	}
}

// TestConsoleArgShorts: the Features column's argument abbreviations are
// the argument table's, served as /console/args.js, which the page
// loads before app.js.
func TestConsoleArgShorts(t *testing.T) {
	h := console.Handler(fakeAPI)
	js := body(t, do(t, h, "GET", "/console/args.js"))
	const prefix = "window.WARREN_ARG_SHORTS = "
	i := strings.Index(js, prefix)
	require.GreaterOrEqual(t, i, 0, js)
	rest := js[i+len(prefix):]
	var got map[string]string
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimSpace(rest), ";")), &got))
	require.Equal(t, queueargs.Shorts(), got)
	require.Equal(t, "TTL", got["x-message-ttl"])
	require.Equal(t, "DLX", got["x-dead-letter-exchange"])
	page := body(t, do(t, h, "GET", "/"))
	require.Less(t, strings.Index(page, "console/args.js"), strings.Index(page, "console/app.js"))
}
