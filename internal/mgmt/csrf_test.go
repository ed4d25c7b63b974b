package mgmt_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// send makes one request to h as guest (user "" sends no credentials)
// with exactly the Content-Type given ("" sends none) and the further
// header name, value pairs, and returns the status, headers and body.
func send(t *testing.T, h *amqptest.API, user, method, path, contentType, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, h.URL()+path, rd)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, user)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(out)
}

// multipartBody is a multipart/form-data body with the given form
// fields, as a browser's form upload (or curl -F) sends it, and its
// Content-Type.
func multipartBody(t *testing.T, fields map[string]string) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for name, value := range fields {
		fw, err := w.CreateFormFile(name, name+".json")
		require.NoError(t, err)
		_, err = io.WriteString(fw, value)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.String(), w.FormDataContentType()
}

// TestWritesNeedJSON: a change with a body (or a Content-Type) must say
// application/json, so that a form of another site (text/plain,
// urlencoded, multipart) never reaches a handler: 415 with the reason,
// and nothing changed. The POST of the curl
// (-H 'Content-Type: text/plain' -d '{"vhosts":[...]}') created the vhost
// (204) before. What RabbitMQ accepts passes: parameters after the type,
// any case, no body at all (curl -X PUT, DELETE), and POST
// /api/definitions as a multipart upload of a "file" part (its UI's
// import).
func TestWritesNeedJSON(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	defs := `{"vhosts":[{"name":"csrf"}]}`
	upload, uploadType := multipartBody(t, map[string]string{"file": `{"vhosts":[{"name":"uploaded"}]}`})
	noFile, noFileType := multipartBody(t, map[string]string{"other": defs})

	for _, tc := range []struct {
		name                    string
		user, method, path, typ string
		body                    string
		status                  int
		reason                  string
	}{
		{"the issue's text/plain definitions", "guest", "POST", "/api/definitions", "text/plain", defs, 415, `request body must be application/json or multipart/form-data (Content-Type: "text/plain")`},
		{"a body without a type", "guest", "POST", "/api/definitions", "", defs, 415, "request body must be application/json or multipart/form-data (Content-Type: none)"},
		{"an urlencoded form", "guest", "POST", "/api/definitions", "application/x-www-form-urlencoded", defs, 415, ""},
		{"a text/plain form's empty post", "guest", "POST", "/api/bindings/%2F/e/amq.direct/q/q1", "text/plain", "", 415, ""},
		{"a user", "guest", "PUT", "/api/users/evil", "text/plain", `{"password":"x","tags":"administrator"}`, 415, `request body must be application/json (Content-Type: "text/plain")`},
		{"a multipart vhost", "guest", "PUT", "/api/vhosts/csrf", uploadType, upload, 415, ""},
		{"a body on a DELETE", "guest", "DELETE", "/api/vhosts/%2F", "text/plain", "x", 415, ""},
		{"a type that does not parse", "guest", "PUT", "/api/vhosts/csrf", "application/json; =", "{}", 415, ""},
		{"401 comes first", "", "POST", "/api/definitions", "text/plain", defs, 401, "Login failed"},

		{"json with a charset", "guest", "PUT", "/api/vhosts/a", "application/json; charset=utf-8", "{}", 201, ""},
		{"json in capitals", "guest", "PUT", "/api/vhosts/b", "Application/JSON", "{}", 201, ""},
		{"no body, no type (curl -X PUT)", "guest", "PUT", "/api/vhosts/c", "", "", 201, ""},
		{"a DELETE without a body", "guest", "DELETE", "/api/vhosts/c", "", "", 204, ""},
		{"a definitions upload", "guest", "POST", "/api/definitions", uploadType, upload, 204, ""},
		{"an upload without a file part", "guest", "POST", "/api/definitions", noFileType, noFile, 400, `multipart upload without a "file" part`},
		{"a broken upload", "guest", "POST", "/api/definitions", "multipart/form-data; boundary=x", "--y\r\n", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := send(t, h, tc.user, tc.method, tc.path, tc.typ, tc.body)
			require.Equal(t, tc.status, status, "%s", body)
			if tc.status >= 400 {
				errText, reason := amqptest.ErrorBody(t, []byte(body))
				if tc.status == 415 {
					require.Equal(t, "unsupported_media_type", errText)
				}
				if tc.reason != "" {
					require.Equal(t, tc.reason, reason)
				}
			}
		})
	}
	for _, vh := range []string{"csrf"} {
		_, ok := b.Admin().GetVHost(t.Context(), vh)
		require.Error(t, ok, "vhost %s was created", vh)
	}
	for _, vh := range []string{"a", "b", "uploaded"} {
		_, err := b.Admin().GetVHost(t.Context(), vh)
		require.NoError(t, err, "vhost %s", vh)
	}
	code, _, _ := h.Do("GET", "/api/users/evil", "guest", nil)
	require.Equal(t, http.StatusNotFound, code, "the text/plain PUT created the user")
	code, _, _ = h.Do("GET", "/api/bindings/%2F/e/amq.direct/q/q1", "guest", nil)
	require.Equal(t, http.StatusNotFound, code)
}

// TestCrossOriginWritesRefused: a change a page of another origin asks
// for is 403 however it is typed (the browser says so in Origin or
// Sec-Fetch-Site), and changes nothing; one from the API's own origin
// (the console), and one with neither header (curl, rabbitmqadmin,
// programs), goes through. Reads are not refused: without CORS headers
// the other page cannot read the answer. Before, any origin could write.
func TestCrossOriginWritesRefused(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	self := h.URL() // http://127.0.0.1:port, the Host the requests carry
	n := 0
	vhost := func() string { n++; return "/api/vhosts/v" + string(rune('a'+n)) }

	for _, tc := range []struct {
		name   string
		hdr    []string
		status int
	}{
		{"a foreign Origin", []string{"Origin", "http://evil.example"}, 403},
		{"the same host on another port", []string{"Origin", "http://127.0.0.1:1"}, 403},
		{"a sandboxed page's null Origin", []string{"Origin", "null"}, 403},
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"Sec-Fetch-Site same-site", []string{"Sec-Fetch-Site", "same-site"}, 403},
		{"Sec-Fetch-Site over a matching Origin", []string{"Sec-Fetch-Site", "cross-site", "Origin", self}, 403},

		{"no Origin (curl, rabbitmqadmin)", nil, 201},
		{"the API's own origin", []string{"Origin", self}, 201},
		{"Sec-Fetch-Site same-origin", []string{"Sec-Fetch-Site", "same-origin", "Origin", self}, 201},
		{"Sec-Fetch-Site none (typed by the user)", []string{"Sec-Fetch-Site", "none"}, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := vhost()
			status, hdr, body := send(t, h, "guest", "PUT", path, "application/json", "{}", tc.hdr...)
			require.Equal(t, tc.status, status, "%s", body)
			require.Empty(t, hdr.Get("Access-Control-Allow-Origin"), "no origin is allowed to read answers by default")
			code, _, _ := h.Do("GET", path, "guest", nil)
			if tc.status == 403 {
				errText, reason := amqptest.ErrorBody(t, []byte(body))
				require.Equal(t, "forbidden", errText)
				require.Contains(t, reason, "cross-origin request refused")
				require.Equal(t, http.StatusNotFound, code, "the refused request created the vhost")
			} else {
				require.Equal(t, http.StatusOK, code)
			}
		})
	}
	// A read from another origin is answered; the browser keeps it from
	// the page, as no CORS header allows it.
	status, hdr, _ := send(t, h, "guest", "GET", "/api/overview", "", "", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, hdr.Get("Access-Control-Allow-Origin"))
	require.Contains(t, hdr.Values("Vary"), "Origin")
	// The refusal comes before the login: no credentials are tried.
	status, _, _ = send(t, h, "", "DELETE", "/api/vhosts/%2F", "", "", "Origin", "http://evil.example")
	require.Equal(t, http.StatusForbidden, status)
}

// TestAllowedOrigins: Options.Management.AllowedOrigins (RabbitMQ's
// management.cors.allow_origins) lets the pages of the origins it lists
// write and read answers: CORS headers on their answers and RabbitMQ's
// OPTIONS preflight (200, Allow, the methods, the asked headers echoed,
// max-age 1800). Other origins stay refused; "*" allows all. broker.New
// refuses an entry that is not an origin.
func TestAllowedOrigins(t *testing.T) {
	const ops = "https://ops.example:8443"
	b := mgmtBrokerWith(t, broker.Options{Management: broker.ManagementOptions{AllowedOrigins: []string{ops}}})
	h := amqptest.NewAPI(t, b.ManagementHandler())

	status, hdr, body := send(t, h, "guest", "PUT", "/api/vhosts/from-ops", "application/json", "{}", "Origin", ops, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusCreated, status, "%s", body)
	require.Equal(t, ops, hdr.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", hdr.Get("Access-Control-Allow-Credentials"))
	status, _, _ = send(t, h, "guest", "PUT", "/api/vhosts/from-evil", "application/json", "{}", "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, status)

	status, hdr, body = send(t, h, "", "OPTIONS", "/api/vhosts/x", "", "", "Origin", ops,
		"Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "authorization,content-type")
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Empty(t, body)
	require.Equal(t, "HEAD, GET, PUT, DELETE, OPTIONS", hdr.Get("Allow"))
	require.Equal(t, "HEAD, GET, PUT, DELETE, OPTIONS", hdr.Get("Access-Control-Allow-Methods"))
	require.Equal(t, "authorization,content-type", hdr.Get("Access-Control-Allow-Headers"))
	require.Equal(t, "1800", hdr.Get("Access-Control-Max-Age"))
	require.Equal(t, ops, hdr.Get("Access-Control-Allow-Origin"))

	// Another origin's preflight gets RabbitMQ's plain OPTIONS answer.
	status, hdr, _ = send(t, h, "", "OPTIONS", "/api/definitions", "", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "HEAD, GET, POST, OPTIONS", hdr.Get("Allow"))
	require.Empty(t, hdr.Get("Access-Control-Allow-Origin"))
	require.Empty(t, hdr.Get("Access-Control-Allow-Methods"))
	status, _, _ = send(t, h, "", "OPTIONS", "/api/nothing-here", "", "", "Origin", ops)
	require.Equal(t, http.StatusNotFound, status)

	all := mgmtBrokerWith(t, broker.Options{Management: broker.ManagementOptions{AllowedOrigins: []string{"*"}}})
	ha := amqptest.NewAPI(t, all.ManagementHandler())
	status, hdr, _ = send(t, ha, "guest", "PUT", "/api/vhosts/any", "application/json", "{}", "Origin", "https://anywhere.example")
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "https://anywhere.example", hdr.Get("Access-Control-Allow-Origin"))

	_, err := broker.New(broker.Options{Management: broker.ManagementOptions{AllowedOrigins: []string{"ops.example", "https://ops.example/path", ops}}})
	require.ErrorContains(t, err, `Options.Management.AllowedOrigins[0]: "ops.example" is not an origin`)
	require.ErrorContains(t, err, `Options.Management.AllowedOrigins[1]: "https://ops.example/path" is not an origin`)
	require.NotContains(t, err.Error(), "[2]")
}
