package amqptest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// echo answers every request with 202 and what it received, as JSON.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	user, pass, auth := r.BasicAuth()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "path": r.URL.Path, "body": string(body), "auth": auth,
		"user": user, "pass": pass, "type": r.Header.Get("Content-Type"), "x": r.Header.Get("X-Test"),
	})
}

func TestAPIDo(t *testing.T) {
	api := NewAPI(t, http.HandlerFunc(echo))
	for _, tc := range []struct {
		name string
		user string
		body any
		hdr  []string
		want map[string]any
	}{
		{"no body, no user", "", nil, nil, map[string]any{"auth": false, "body": "", "type": ""}},
		{"string body as is", "mon", `{"a":1}`, nil, map[string]any{"auth": true, "user": "mon", "pass": "mon", "body": `{"a":1}`, "type": "application/json"}},
		{"value body as JSON", "guest", map[string]int{"a": 1}, nil, map[string]any{"body": `{"a":1}`, "type": "application/json"}},
		{"extra headers", "guest", nil, []string{"X-Test", "yes", "Content-Type", "text/plain"}, map[string]any{"x": "yes", "type": "text/plain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, body := api.Do("PUT", "/api/x", tc.user, tc.body, tc.hdr...)
			require.Equal(t, http.StatusAccepted, status)
			require.Equal(t, "application/json", hdr.Get("Content-Type"))
			var got map[string]any
			require.NoError(t, json.Unmarshal(body, &got))
			require.Equal(t, "PUT", got["method"])
			require.Equal(t, "/api/x", got["path"])
			for k, v := range tc.want {
				require.Equal(t, v, got[k], k)
			}
		})
	}
}

func TestAPIGet(t *testing.T) {
	api := NewAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _, _ := r.BasicAuth()
		_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "user": user})
	}))
	got := api.Get("/api/overview").(map[string]any)
	require.Equal(t, "GET", got["method"])
	require.Equal(t, "guest", got["user"], "Get asks as guest")

	bad := NewAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"bad_request"}`, http.StatusBadRequest)
	}))
	require.True(t, fails(t, func(tb testing.TB) { bad.tb = tb; bad.Get("/") }), "a status other than 200")
	notJSON := NewAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html>") }))
	require.True(t, fails(t, func(tb testing.TB) { notJSON.tb = tb; notJSON.Get("/") }), "a body that is not JSON")
}

func TestErrorBody(t *testing.T) {
	e, reason := ErrorBody(t, []byte(`{"error":"not_found","reason":"Not Found"}`))
	require.Equal(t, "not_found", e)
	require.Equal(t, "Not Found", reason)
	require.True(t, fails(t, func(tb testing.TB) { ErrorBody(tb, []byte("Not Found")) }))
}

func TestIdle(t *testing.T) {
	var deadline time.Time
	Idle(t, func(ctx context.Context) error {
		deadline, _ = ctx.Deadline()
		return nil
	})
	require.WithinDuration(t, time.Now().Add(IdleTimeout), deadline, IdleTimeout/2, "bounded by IdleTimeout")
	require.True(t, fails(t, func(tb testing.TB) {
		Idle(tb, func(context.Context) error { return context.DeadlineExceeded })
	}), "an error from waitIdle fails the test")
}

// TestDialVia checks that DialVia dials through its function and logs in
// as user with password user and the connection name; the fake server
// hangs up after connection.start-ok, so the dial itself fails.
func TestDialVia(t *testing.T) {
	server, client := net.Pipe()
	t.Cleanup(func() { client.Close() })
	startOk := make(chan *amqp.ConnectionStartOk, 1)
	done := make(chan error, 1)
	go func() {
		defer server.Close()
		srv := NewRawClient(t, server)
		if _, err := srv.Frames.ReadProtocolHeader(); err != nil {
			done <- err
			return
		}
		start := &amqp.ConnectionStart{VersionMajor: 0, VersionMinor: 9, Mechanisms: "PLAIN", Locales: "en_US"}
		if _, err := server.Write(amqp.AppendMethodFrame(nil, 0, start)); err != nil {
			done <- err
			return
		}
		f, err := srv.Frames.ReadFrame()
		if err != nil {
			done <- err
			return
		}
		m, err := amqp.DecodeMethod(f.Payload)
		if err != nil {
			done <- err
			return
		}
		ok, isOk := m.(*amqp.ConnectionStartOk)
		if !isOk {
			done <- errors.New("not connection.start-ok: " + m.Name())
			return
		}
		startOk <- ok
		done <- nil
	}()
	dialled := 0
	dial := func(network, addr string) (net.Conn, error) { dialled++; return client, nil }
	require.True(t, fails(t, func(tb testing.TB) { DialVia(tb, dial, "mon", "conn-1") }), "the fake server hangs up")
	require.NoError(t, <-done)
	require.Equal(t, 1, dialled)
	ok := <-startOk
	require.Equal(t, "PLAIN", ok.Mechanism)
	require.Equal(t, "\x00mon\x00mon", ok.Response)
	require.Equal(t, "conn-1", ok.ClientProperties["connection_name"])
}

func TestAPIURLAndClient(t *testing.T) {
	api := NewAPI(t, http.HandlerFunc(echo))
	resp, err := api.Client().Get(api.URL() + "/x")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "URL reaches the served handler")
}
