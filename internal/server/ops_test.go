package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// startServer runs the server with args, reads one stdout line per
// prefix (in order) and returns what follows each prefix, the addresses it
// listens on; cleanup stops it.
func startServer(t *testing.T, prefixes []string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, stdoutW, io.Discard)
		stdoutW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	rd := bufio.NewReader(stdoutR)
	var addrs []string
	for _, prefix := range prefixes {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
		require.True(t, ok, "line %q", line)
		addrs = append(addrs, addr)
	}
	go io.Copy(io.Discard, rd)
	return addrs
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

func TestHTTPAndDefinitionsFlags(t *testing.T) {
	defs := filepath.Join(t.TempDir(), "defs.json")
	require.NoError(t, os.WriteFile(defs, []byte(`{
		"vhosts": [{"name": "/"}, {"name": "shop"}],
		"users": [{"name": "guest", "password": "guest", "tags": "administrator"}],
		"permissions": [{"user": "guest", "vhost": "shop", "configure": ".*", "write": ".*", "read": ".*"}],
		"exchanges": [{"name": "orders", "vhost": "shop", "type": "topic", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}],
		"queues": [{"name": "new-orders", "vhost": "shop", "durable": true, "auto_delete": false, "arguments": {}}],
		"bindings": [{"source": "orders", "vhost": "shop", "destination": "new-orders", "destination_type": "queue", "routing_key": "new.#", "arguments": {}}]
	}`), 0o644))
	web := startServer(t, []string{"listening on ", "management on "},
		"-memory", "-addr", "127.0.0.1:0", "-http", "127.0.0.1:0", "-definitions", defs)[1]

	var q map[string]any
	getJSON(t, "http://"+web+"/api/queues/shop/new-orders", &q)
	require.Equal(t, "new-orders", q["name"])
	var bindings []map[string]any
	getJSON(t, "http://"+web+"/api/bindings/shop/e/orders/q/new-orders", &bindings)
	require.Len(t, bindings, 1)

	// /metrics is open and names no vhost or queue; /metrics/per-object
	// does, for administrator and monitoring users only.
	scrape := func(path, user string) (int, string) {
		req, err := http.NewRequest("GET", "http://"+web+path, nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, user)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	status, body := scrape("/metrics", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "\nrabbitmq_queue_messages_ready 0\n")
	require.NotContains(t, body, "new-orders")
	status, body = scrape("/metrics/per-object", "")
	require.Equal(t, http.StatusUnauthorized, status)
	require.NotContains(t, body, "new-orders")
	status, body = scrape("/metrics/per-object", "guest")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `rabbitmq_queue_messages_ready{vhost="shop",queue="new-orders"} 0`)
}

func TestDefinitionsFlagRefusesWhatItCannotHonour(t *testing.T) {
	defs := filepath.Join(t.TempDir(), "defs.json")
	require.NoError(t, os.WriteFile(defs, []byte(`{"users": [{"name": "admin", "password_hash": "x", "tags": []}]}`), 0o644))
	err := run(context.Background(), []string{"-memory", "-addr", "127.0.0.1:0", "-definitions", defs}, io.Discard, io.Discard)
	require.ErrorContains(t, err, `user "admin": password_hash is not base64`)
	err = run(context.Background(), []string{"-memory", "-addr", "127.0.0.1:0", "-definitions", filepath.Join(t.TempDir(), "missing.json")}, io.Discard, io.Discard)
	require.Error(t, err)
}
