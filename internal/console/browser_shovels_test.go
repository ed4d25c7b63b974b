package console_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
