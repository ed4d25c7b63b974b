package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// The administrator's pages added after the first ones: definitions
// export and import, vhost limits and topic permissions. As in
// browser_pages_test.go, each action is checked over AMQP and through the
// API.

// downloadsTo lets the browser save downloads into dir without asking.
func downloadsTo(dir string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir,
		})
		return err
	})
}

// waitFile waits until dir/name exists and is complete (Chromium writes
// a .crdownload first and renames it), and returns its contents.
func waitFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	var body []byte
	amqptest.Poll(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, name))
		body = b
		return err == nil && len(b) > 0
	}, "download of %s (%v)", name, func() []string { m, _ := filepath.Glob(dir + "/*"); return m }())
	return body
}

// openPage opens the console, logs in as user (password = user name) and
// clicks the menu entry nav.
func openPage(srv *amqptest.API, user, nav string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Navigate(srv.URL()+"/"), login(user, user), chromedp.Click(tid(nav)))
}

// apiList GETs path from the API as user, requires 200 and decodes the
// JSON array it answers.
func apiList(t *testing.T, srv *amqptest.API, user, path string) []any {
	t.Helper()
	code, _, body := srv.Do("GET", path, user, nil)
	require.Equal(t, http.StatusOK, code, "GET %s: %s", path, body)
	var v []any
	require.NoError(t, json.Unmarshal(body, &v), "GET %s: %s", path, body)
	return v
}

// TestConsoleDefinitionsInBrowser: an administrator downloads the
// broker's definitions (the file holds what AMQP declared, with the
// profile's RabbitMQ version), imports definitions pasted in and from a
// file (AMQP then finds their queues), and sees a file that is not JSON
// refused with the parser's reason; a management user is refused the
// page.
func TestConsoleDefinitionsInBrowser(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{
		{Name: "admin", Password: "admin", Tags: []string{"administrator"}},
		{Name: "viewer", Password: "viewer", Tags: []string{"management"}},
	}})
	conn := amqptest.DialVia(t, b.Dial, "admin", "definitions")
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "exported.q", true)

	dir := t.TempDir()
	ctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(ctx,
		downloadsTo(dir),
		openPage(srv, "admin", "nav-definitions"),
		waitUntil(func(ctx context.Context, tab *chromedp.Target) bool {
			v, err := chromedp.Evaluate[string](`document.querySelector('[data-testid="definitions-filename"]').value`)(ctx, tab)
			return err == nil && strings.HasSuffix(v, ".json")
		}),
		clear(tid("definitions-filename")),
		chromedp.SendKeys(tid("definitions-filename"), "broker.json"),
		chromedp.Click(tid("definitions-export-submit")),
		waitText(tid("definitions-export-status"), "Exported 2 users, 1 vhosts"),
	))
	var exported map[string]any
	require.NoError(t, json.Unmarshal(waitFile(t, dir, "broker.json"), &exported))
	overview := apiJSON(t, srv, "admin", "/api/overview", http.StatusOK)
	require.Equal(t, overview["rabbitmq_version"], exported["rabbit_version"])
	var names []string
	for _, q := range exported["queues"].([]any) {
		names = append(names, q.(map[string]any)["name"].(string))
	}
	require.Equal(t, []string{"exported.q"}, names)
	screenshot(t, ctx, artifacts(t), "definitions")

	// Pasted in.
	pasted := `{"vhosts":[{"name":"imported-vh"}],"queues":[{"name":"pasted.q","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}]}`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(tid("definitions-text"), pasted),
		chromedp.Click(tid("definitions-import-submit")),
		waitText(tid("definitions-import-status"), "Imported 0 users, 1 vhosts"),
	))
	require.True(t, amqptest.QueueExists(t, conn, "pasted.q"))
	apiJSON(t, srv, "admin", "/api/vhosts/imported-vh", http.StatusOK)

	// From a file, which wins over the text box.
	file := filepath.Join(t.TempDir(), "upload.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"queues":[{"name":"uploaded.q","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-max-length":3}}]}`), 0o600))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetUploadFiles(tid("definitions-file"), []string{file}),
		chromedp.Click(tid("definitions-import-submit")),
		waitText(tid("definitions-import-status"), "1 queues"),
	))
	require.True(t, amqptest.QueueExists(t, conn, "uploaded.q"))
	q := apiJSON(t, srv, "admin", "/api/queues/%2F/uploaded.q", http.StatusOK)
	require.Equal(t, map[string]any{"x-max-length": float64(3)}, q["arguments"])

	// Not JSON: refused before anything is sent; and what the API refuses
	// shows its reason.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(tid("definitions-text"), `{"queues": [`),
		chromedp.Click(tid("definitions-import-submit")),
		waitText(tid("definitions-import-status"), "Not JSON"),
		chromedp.SetValue(tid("definitions-text"), `{"queues":[{"name":"bad.q","vhost":"no-such-vhost","durable":true}]}`),
		chromedp.Click(tid("definitions-import-submit")),
		waitText(tid("definitions-import-status"), "no-such-vhost"),
	))
	require.False(t, amqptest.QueueExists(t, conn, "bad.q"))

	// A management user: refused, and no Definitions in the menu.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("logout")),
		login("viewer", "viewer"),
		chromedp.Navigate(srv.URL()+"/#/definitions"),
		waitText(tid("access-denied"), "Not administrator user"),
	))
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="nav-definitions"]').closest('li').hidden`))
	require.NoError(t, err)
	require.True(t, hidden)
}

// TestConsoleLimitsInBrowser: an administrator sets a vhost's max-queues
// from the page (AMQP may then declare one queue, not a second: 406 with
// RabbitMQ's text) and clears it (the second declare works); a value
// that is not a whole number is refused on the page.
func TestConsoleLimitsInBrowser(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "admin", Tags: []string{"administrator"}}}})
	conn := amqptest.DialVia(t, b.Dial, "admin", "limits")

	ctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(ctx,
		openPage(srv, "admin", "nav-limits"),
		waitText(tid("limits"), "No limits."),
		waitExists(`[data-testid="limit-vhost"] option[value="/"]`),
		chromedp.SetValue(tid("limit-name"), "max-queues"),
		chromedp.SendKeys(tid("limit-value"), "1.5"),
		chromedp.Click(tid("set-limit-submit")),
		waitText(tid("set-limit-status"), "whole number"),
		clear(tid("limit-value")),
		chromedp.SendKeys(tid("limit-value"), "1"),
		chromedp.Click(tid("set-limit-submit")),
		waitText(tid("set-limit-status"), "Limit max-queues on / set to 1."),
		waitText(tid("limit-row"), "max-queues"),
	))
	limits := apiList(t, srv, "admin", "/api/vhost-limits/%2F")
	require.Equal(t, []any{map[string]any{"vhost": "/", "value": map[string]any{"max-queues": float64(1)}}}, limits)
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "first", false)
	_, err := ch.QueueDeclare("second", false, false, false, false, nil)
	amqptest.RequireReply(t, err, amqp091.PreconditionFailed, "queue limit in vhost '/' (1) is reached")
	screenshot(t, ctx, artifacts(t), "limits")

	require.NoError(t, chromedp.Do(ctx,
		confirm(rowButton("limit-row", "max-queues", "limit-delete")),
		waitText(tid("limits"), "No limits."),
	))
	amqptest.DeclareQueue(t, amqptest.Channel(t, conn), "second", false)
}

// TestConsoleTopicPermissionsInBrowser: an administrator sets a user's
// topic permission on amq.topic from the permissions page; over AMQP the
// user may then bind only with keys its read expression matches (403
// otherwise), and clearing it from the page lifts the restriction.
func TestConsoleTopicPermissionsInBrowser(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{
		{Name: "admin", Password: "admin", Tags: []string{"administrator"}},
		{Name: "app", Password: "app"},
	}})
	code, _, body := srv.Do("PUT", "/api/permissions/%2F/app", "admin", map[string]any{"configure": ".*", "write": ".*", "read": ".*"})
	require.Less(t, code, 300, "%s", body)
	conn := amqptest.DialVia(t, b.Dial, "app", "topics")
	amqptest.DeclareQueue(t, amqptest.Channel(t, conn), "eu-orders", false)

	ctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(ctx,
		openPage(srv, "admin", "nav-permissions"),
		waitText(tid("topic-permissions"), "No topic permissions."),
		waitExists(`[data-testid="topic-vhost"] option[value="/"]`),
		chromedp.SendKeys(tid("topic-user"), "app"),
		clear(tid("topic-read")),
		chromedp.SendKeys(tid("topic-read"), `^orders\.eu\.`),
		chromedp.Click(tid("set-topic-permission-submit")),
		waitText(tid("set-topic-permission-status"), "Topic permission set."),
		waitText(tid("topic-permission-row"), "amq.topic"),
	))
	tp := apiList(t, srv, "admin", "/api/topic-permissions/%2F/app")
	require.Equal(t, []any{map[string]any{"user": "app", "vhost": "/", "exchange": "amq.topic", "write": ".*", "read": `^orders\.eu\.`}}, tp)
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.QueueBind("eu-orders", "orders.eu.#", "amq.topic", false, nil))
	err := ch.QueueBind("eu-orders", "orders.us.#", "amq.topic", false, nil)
	amqptest.RequireReply(t, err, amqp091.AccessRefused, "access to topic 'orders.us.#' in exchange 'amq.topic'")
	screenshot(t, ctx, artifacts(t), "topic-permissions")

	require.NoError(t, chromedp.Do(ctx,
		confirm(rowButton("topic-permission-row", "amq.topic", "topic-permission-delete")),
		waitText(tid("topic-permissions"), "No topic permissions."),
	))
	require.NoError(t, amqptest.Channel(t, conn).QueueBind("eu-orders", "orders.us.#", "amq.topic", false, nil))
}
