package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
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

// TestConsoleFederationInBrowser: the federation page shows each link
// of Warren's GET /api/federation-links as RabbitMQ's Federation Status
// does (upstream with the upstream's exchange or queue when its name
// differs, the local exchange or queue, state, error detail) with
// Warren's forwarded count, and restarts one with RabbitMQ 3.10.8's
// DELETE .../{id}/{node}/restart, after which the link runs on a new
// connection. The broker has no guest: its links log in as its internal
// user. A broker without links shows none.
func TestConsoleFederationInBrowser(t *testing.T) {
	b, api := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "admin", Tags: []string{"administrator"}}}})
	a := b.Admin()
	ctx := context.Background()
	_, err := a.PutGlobalParameter(ctx, broker.GlobalParameter{Name: "cluster_name", Value: json.RawMessage(`"down"`)})
	require.NoError(t, err)
	up := brokertest.New(t)
	for name, uri := range map[string]string{"old-rabbit": up.URL(), "gone": "amqp://127.0.0.1:1"} {
		v, err := json.Marshal(map[string]any{"uri": uri, "reconnect-delay": 1})
		require.NoError(t, err)
		_, err = a.PutParameter(ctx, broker.Parameter{VHost: "/", Component: "federation-upstream", Name: name, Value: v})
		require.NoError(t, err)
	}
	require.NoError(t, a.PutPolicy(ctx, broker.Policy{VHost: "/", Name: "orders", Pattern: "^orders$", ApplyTo: "exchanges",
		Definition: map[string]any{"federation-upstream": "old-rabbit"}}))
	require.NoError(t, a.PutPolicy(ctx, broker.Policy{VHost: "/", Name: "jobs", Pattern: "^jobs$", ApplyTo: "queues",
		Definition: map[string]any{"federation-upstream": "gone"}}))
	ch := amqptest.Channel(t, amqptest.DialVia(t, b.Dial, "admin", "test"))
	require.NoError(t, ch.ExchangeDeclare("orders", "fanout", true, false, false, false, nil))
	amqptest.DeclareQueue(t, ch, "orders.copy", true)
	require.NoError(t, ch.QueueBind("orders.copy", "", "orders", false, nil))
	amqptest.DeclareQueue(t, ch, "jobs", true)

	// Three messages through the running link, so it has counted them.
	upAPI := amqptest.NewAPI(t, up.ManagementHandler())
	amqptest.Poll(t, func() bool {
		for _, bd := range upAPI.Get("/api/bindings/%2F").([]any) {
			if bd.(map[string]any)["source"] == "orders" {
				return true
			}
		}
		return false
	}, "the link never bound upstream")
	uch := amqptest.ConfirmChannel(t, brokertest.Dial(t, up))
	for i := range 3 {
		amqptest.Publish(t, uch, "orders", "", fmt.Sprint("m", i))
	}
	amqptest.Poll(t, func() bool { return queueLen(t, ch, "orders.copy") == 3 }, "the link did not federate 3 messages")

	links := func() []map[string]any {
		_, _, body := api.Do("GET", "/api/federation-links", "admin", nil)
		var out []map[string]any
		require.NoError(t, json.Unmarshal(body, &out), "%s", body)
		return out
	}
	var running map[string]any
	amqptest.Poll(t, func() bool {
		l := links()
		if len(l) != 2 || l[0]["status"] != "running" || l[1]["status"] != "error" {
			return false
		}
		running = l[0]
		return true
	}, "links never reached running and error")

	bctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(api.URL()+"/"),
		login("admin", "admin"),
		chromedp.Click(tid("nav-federation")),
		waitText(tid("federation-links-table"), "orders"),
		waitText(tid("federation-links-table"), "jobs"),
		waitText(tid("federation-forwarded"), "3"),
		waitText(tid("federation-error"), "connection refused"),
	))
	states, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="federation-link-row"] [data-testid="link-state"]')].map((e) => e.textContent)`))
	require.NoError(t, err)
	require.Equal(t, []string{"running", "error"}, states)
	screenshot(t, bctx, artifacts(t), "federation")
	since := running["timestamp"]
	require.NoError(t, chromedp.Do(bctx,
		confirm(rowButton("federation-link-row", "orders", "federation-restart")),
		waitText(tid("toast"), "Federation link "+running["id"].(string)+" restarted."),
	))
	// The restart went through: the link was stopped (its forwarded
	// count starts again) and runs again.
	amqptest.Poll(t, func() bool {
		l := links()
		return len(l) == 2 && l[0]["status"] == "running" && l[0]["messages_forwarded"] == 0.0
	}, "the link did not restart (was %v)", since)

	// A broker without federation links.
	_, empty := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "admin", Tags: []string{"administrator"}}}})
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(empty.URL()+"/#/federation"),
		login("admin", "admin"),
		waitText(tid("federation-links"), "No federation links."),
	))
}

// queueLen is queue's ready count, read with a passive declare.
func queueLen(t *testing.T, ch *amqp091.Channel, queue string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}
