package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/console"
)

// The tests here drive the shovel side of the console: the queue page's
// "Move messages", the shovels page and the federation status page.
// They reuse browser_test.go's browser, serveConsole, login and wait
// helpers and browser_pages_test.go's confirm and rowButton.

// shovelCounts reads one shovel's counts from GET /api/shovels as admin.
func shovelCounts(t *testing.T, srv *amqptest.API, name string) (state string, forwarded, remaining int, found bool) {
	t.Helper()
	code, _, body := srv.Do("GET", "/api/shovels", "admin", nil)
	require.Equal(t, 200, code, "%s", body)
	var list []map[string]any
	require.NoError(t, json.Unmarshal(body, &list))
	for _, m := range list {
		if m["name"] != name {
			continue
		}
		f, _ := m["messages_forwarded"].(float64)
		r, ok := m["messages_remaining"].(float64)
		if !ok {
			r = -1
		}
		return m["state"].(string), int(f), int(r), true
	}
	return "", 0, 0, false
}

// TestConsoleMoveMessagesInBrowser: the queue page's "Move messages"
// moves 1,000 persistent messages to a queue of another Warren over TCP
// and shows the move's progress as /api/shovels reports it: the network
// to the other broker is held midway, and the page shows exactly the
// counts the API does (some moved, the rest remaining); once the
// network heals the page says the move is done and the shovel deleted
// itself. The source ends empty and the destination holds every
// message once, in order.
func TestConsoleMoveMessagesInBrowser(t *testing.T) {
	const n = 1000
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "admin", Tags: []string{"administrator"}}}})
	ch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, b.Dial, "admin", "publisher"))
	amqptest.DeclareQueue(t, ch, "dlq", true)
	bodies := amqptest.Numbered("m", n)
	amqptest.PublishConfirmed(t, ch, "dlq", true, bodies...)

	other := brokertest.NewLab(t, broker.Options{})
	net := other.NewLink("shovel")
	net.Bandwidth(20_000) // about 90 bytes a message: the move takes seconds
	const name = "Move from dlq"

	dir := artifacts(t)
	ctx := browser(t, 1280, 1000)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL()+"/#/queues/%2F/dlq"),
		login("admin", "admin"),
		waitText(in(tid("queue-summary"), "queue-ready"), "1,000"),
		chromedp.SendKeys(tid("move-dest-queue"), "replayed"),
		chromedp.SendKeys(tid("move-dest-uri"), net.URL()),
		chromedp.Click(tid("move-submit")),
		waitText(tid("move-status"), `Shovel "Move from dlq" created.`),
	))

	// Hold the network once some messages moved; the counts then stop.
	amqptest.Poll(t, func() bool { _, f, _, _ := shovelCounts(t, srv, name); return f > 0 }, "the shovel moved nothing")
	net.Partition()
	var fwd, rem int
	amqptest.Poll(t, func() bool {
		_, f1, r1, _ := shovelCounts(t, srv, name)
		time.Sleep(300 * time.Millisecond)
		state, f2, r2, ok := shovelCounts(t, srv, name)
		fwd, rem = f2, r2
		return ok && state == "running" && f1 == f2 && r1 == r2
	}, "the counts did not settle while the network was held")
	require.Equal(t, n, fwd+rem)
	require.Less(t, fwd, n, "the move finished before the network was held")
	require.NoError(t, chromedp.Do(ctx, waitText(tid("move-progress"),
		fmt.Sprintf("Moving to replayed: %s of 1,000 moved, %s remaining.", comma(fwd), comma(rem))),
		chromedp.ScrollIntoView(tid("move-progress"))))
	screenshot(t, ctx, dir, "move-messages-progress")

	net.Heal()
	require.NoError(t, chromedp.Do(ctx,
		waitText(tid("move-progress"), "Done: 1,000 messages moved to replayed; the shovel deleted itself."),
		waitText(in(tid("queue-summary"), "queue-ready"), "0"),
		chromedp.ScrollIntoView(tid("move-progress")),
	))
	screenshot(t, ctx, dir, "move-messages-done")
	code, _, _ := srv.Do("GET", "/api/parameters/shovel/%2F/"+url.PathEscape(name), "admin", nil)
	require.Equal(t, 404, code)
	amqptest.RequireEmpty(t, ch, "dlq")
	require.Equal(t, bodies, amqptest.GetAll(t, amqptest.Channel(t, other.DialAMQP(t, "reader")), "replayed"))
}

// comma formats n as the page does (toLocaleString('en')).
func comma(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestConsoleShovelsInBrowser: the shovels page adds a shovel through
// its form (a shovel parameter, as RabbitMQ's Shovel Management does),
// lists it running with the messages it forwarded, restarts it and
// deletes it; a link that cannot connect shows its state and reason; a
// definition RabbitMQ refuses is refused in the form with the API's
// text.
func TestConsoleShovelsInBrowser(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "admin", Tags: []string{"administrator"}}}})
	ch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, b.Dial, "admin", "publisher"))
	amqptest.DeclareQueue(t, ch, "in", true)

	dir := artifacts(t)
	ctx := browser(t, 1280, 1000)
	add := func(name, src, destURI, dest string) chromedp.Action[chromedp.Void] {
		steps := []chromedp.Action[chromedp.Void]{
			clear(tid("shovel-name")), clear(tid("shovel-src")), clear(tid("shovel-dest")), clear(tid("shovel-dest-uri")),
			chromedp.SendKeys(tid("shovel-name"), name), chromedp.SendKeys(tid("shovel-src"), src),
			chromedp.SendKeys(tid("shovel-dest"), dest),
		}
		if destURI != "" {
			steps = append(steps, chromedp.SendKeys(tid("shovel-dest-uri"), destURI))
		}
		return chromedp.Steps(append(steps, chromedp.Click(tid("add-shovel-submit")))...)
	}
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL()+"/"),
		login("admin", "admin"),
		chromedp.Click(tid("nav-shovels")),
		waitText(tid("shovels"), "No shovels."),
		add("keep", "in", "", "out"),
		waitText(tid("add-shovel-status"), "Shovel keep added."),
		waitText(tid("shovels-table"), "running"),
	))
	amqptest.PublishConfirmed(t, ch, "in", true, "a", "b", "c")
	require.NoError(t, chromedp.Do(ctx,
		waitText(in(tid("shovel-row"), "shovel-forwarded"), "3"),
		waitText(in(tid("shovel-row"), "shovel-remaining"), "no limit"),
	))
	require.Equal(t, []string{"a", "b", "c"}, amqptest.GetAll(t, ch, "out"))

	// One that cannot reach its destination says why.
	require.NoError(t, chromedp.Do(ctx,
		add("nowhere", "in2", "amqp://guest:guest@127.0.0.1:1/", "out"),
		waitText(tid("add-shovel-status"), "Shovel nowhere added."),
		waitText(tid("shovels-table"), "starting"),
		waitText(tid("shovel-reason"), "connection refused"),
	))
	screenshot(t, ctx, dir, "shovels")

	// RabbitMQ's refusal text, in the form.
	require.NoError(t, chromedp.Do(ctx,
		add("bad", "in", "http://example.com/", "out"),
		waitText(tid("add-shovel-status"), "not a valid URI"),
	))

	// Restart, then delete, each with two presses.
	require.NoError(t, chromedp.Do(ctx,
		confirm(rowButton("shovel-row", "keep", "shovel-restart")),
		waitText(tid("toast"), "Shovel keep restarted."),
		confirm(rowButton("shovel-row", "nowhere", "shovel-delete")),
		waitText(tid("toast"), "Shovel nowhere deleted."),
		waitGone(`//tr[@data-testid="shovel-row"][contains(., "nowhere")]`),
	))
	code, _, _ := srv.Do("GET", "/api/parameters/shovel/%2F/nowhere", "admin", nil)
	require.Equal(t, 404, code)
	amqptest.PublishConfirmed(t, ch, "in", true, "d")
	require.NoError(t, chromedp.Do(ctx, waitText(in(tid("shovel-row"), "shovel-forwarded"), "1"))) // counts start again after a restart
	require.Equal(t, []string{"d"}, amqptest.GetAll(t, ch, "out"))
}

// federationAPI answers GET /api/federation-links with two links in the
// shape RabbitMQ 3.10.8's rabbitmq_federation_management writes
// (rabbit_federation_status:format plus node and local_channel): an
// exchange link running with an inbound confirm rate, and a queue link
// in error. It records each restart asked for (DELETE
// /api/federation-links/vhost/{vhost}/{id}/{node}/restart).
func federationAPI(restarts chan<- string) http.Handler {
	links := []map[string]any{{
		"node": "warren@test", "exchange": "orders", "upstream_exchange": "orders", "type": "exchange", "vhost": "/",
		"upstream": "old-rabbit", "id": "3c2f8b1e", "status": "running", "local_connection": "<rabbit@old.1.2.3>",
		"uri": "amqp://old-rabbit:5672", "timestamp": "2026-12-04 02:30:00",
		"local_channel": map[string]any{"message_stats": map[string]any{"confirm": 120, "confirm_details": map[string]any{"rate": 12.0}}},
	}, {
		"node": "warren@test", "queue": "jobs", "upstream_queue": "jobs-v1", "consumer_tag": "federation-link-jobs", "type": "queue", "vhost": "/",
		"upstream": "old-rabbit", "id": "9a01d4c7", "status": "error", "error": "{auth_failure,\"ACCESS_REFUSED\"}",
		"uri": "amqp://old-rabbit:5672", "timestamp": "2026-12-04 02:31:00",
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		switch {
		case r.URL.Path == "/api/whoami":
			v = map[string]any{"name": "admin", "tags": []string{"administrator"}}
		case r.Method == "GET" && r.URL.Path == "/api/federation-links":
			v = links
		case r.Method == "DELETE" && strings.HasPrefix(r.URL.EscapedPath(), "/api/federation-links/vhost/"):
			restarts <- r.URL.EscapedPath()
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// TestConsoleFederationInBrowser: the federation page shows each link of
// GET /api/federation-links as RabbitMQ's Federation Status does
// (upstream with the upstream's exchange or queue when its name differs,
// the local exchange or queue, state, inbound rate, error detail) and
// restarts one with RabbitMQ's DELETE. The API here is a stand-in in
// RabbitMQ's documented shape; a broker without federation links (the
// route answers 404) shows none.
func TestConsoleFederationInBrowser(t *testing.T) {
	restarts := make(chan string, 1)
	srv := httptest.NewServer(console.Handler(federationAPI(restarts)))
	t.Cleanup(srv.Close)
	ctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		login("admin", "admin"),
		chromedp.Click(tid("nav-federation")),
		waitText(tid("federation-links-table"), "orders"),
		waitText(tid("federation-links-table"), "jobs-v1"),
		waitText(tid("federation-links-table"), "12/s"),
		waitText(tid("federation-error"), "ACCESS_REFUSED"),
	))
	states, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="federation-link-row"] [data-testid="link-state"]')].map((e) => e.textContent)`))
	require.NoError(t, err)
	require.Equal(t, []string{"running", "error"}, states)
	screenshot(t, ctx, artifacts(t), "federation")
	require.NoError(t, chromedp.Do(ctx,
		confirm(rowButton("federation-link-row", "orders", "federation-restart")),
		waitText(tid("toast"), "Federation link 3c2f8b1e restarted."),
	))
	require.Equal(t, "/api/federation-links/vhost/%2F/3c2f8b1e/warren%40test/restart", <-restarts)

	// A Warren whose API has no federation links route.
	_, api := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "admin", Tags: []string{"administrator"}}}})
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(api.URL()+"/#/federation"),
		login("admin", "admin"),
		waitText(tid("federation-links"), "No federation links."),
	))
}
