package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// The tests here drive the exchanges, connections, channels and admin
// pages end to end: what the page does is checked over AMQP with
// amqp091-go and through the management API, not by reading the page
// back. They reuse browser_test.go's browser, serveConsole, login and
// wait helpers.

// rowButton is the button with data-testid button in the table row whose
// text contains text and, unless row is "", whose data-testid is row
// (XPath: CSS cannot select a row by its text).
func rowButton(row, text, button string) chromedp.Search {
	match := fmt.Sprintf(`[contains(., %q)]`, text)
	if row != "" {
		match = fmt.Sprintf(`[@data-testid=%q]`, row) + match
	}
	return chromedp.Search(fmt.Sprintf(`//tr%s//button[@data-testid=%q]`, match, button))
}

// confirm presses a confirm button twice (the console acts on the second
// press, confirmButton in app.js).
func confirm(button chromedp.Search) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Click(button), waitText(chromedp.CSS(".confirming"), "Really"), chromedp.Click(button))
}

// refreshed runs trigger and waits for the page's next refresh to finish
// (app.js stamps body's data-refreshed after each).
func refreshed(trigger ...chromedp.Action[chromedp.Void]) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tab *chromedp.Target) error {
		before, err := chromedp.Evaluate[string](`document.body.dataset.refreshed || ''`)(ctx, tab)
		if err != nil {
			return err
		}
		if _, err := chromedp.Steps(trigger...)(ctx, tab); err != nil {
			return err
		}
		_, err = waitExists(fmt.Sprintf(`body[data-refreshed]:not([data-refreshed=%q])`, before))(ctx, tab)
		return err
	})
}

// waitGone waits until no element matches the XPath expression.
func waitGone(xpath string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitNotPresent(chromedp.Search(xpath))
}

// apiJSON GETs path from the API as user and decodes the answer,
// requiring status.
func apiJSON(t *testing.T, srv *amqptest.API, user, path string, status int) map[string]any {
	t.Helper()
	code, _, body := srv.Do("GET", path, user, nil)
	require.Equal(t, status, code, "GET %s: %s", path, body)
	var v map[string]any
	if status == http.StatusOK {
		require.NoError(t, json.Unmarshal(body, &v), "GET %s: %s", path, body)
	}
	return v
}

// TestConsoleExchangesInBrowser: an exchange declared over AMQP is listed
// with its type; its page lists its bindings, binds a queue, publishes
// (the message arrives in the bound queue, read over AMQP), reports an
// unrouted publish as the API does, and unbinds.
func TestConsoleExchangesInBrowser(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "admin", Tags: []string{"administrator"}}}})
	conn := amqptest.Dial(t, "amqp://admin:admin@127.0.0.1:5672/", amqp091.Config{Dial: b.Dial})
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.ExchangeDeclare("invoices", "topic", true, false, false, false, nil))
	amqptest.DeclareQueue(t, ch, "invoices.eu", true)
	amqptest.DeclareQueue(t, ch, "invoices.us", true)
	require.NoError(t, ch.QueueBind("invoices.eu", "invoice.eu.*", "invoices", false, nil))

	ctx := browser(t, 1280, 800)
	row := tid("exchange-row")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL()+"/"),
		login("admin", "admin"),
		chromedp.Click(tid("nav-exchanges")),
		waitText(tid("exchanges-table"), "amq.topic"),
		chromedp.SendKeys(tid("exchanges-filter"), "invoices"),
		waitText(row, "invoices"),
		waitText(row, "topic"),
		waitText(tid("exchanges-count"), "1 of"),
		chromedp.Click(in(row, "exchange-link")),
		waitText(tid("exchange-name"), "invoices"),
		waitText(tid("exchange-details"), "topic"),
		waitText(tid("bindings-from-table"), "invoices.eu"),
		waitText(tid("bindings-from-table"), "invoice.eu.*"),
	))

	// Bind the second queue from the page; AMQP routing then uses it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(tid("bind-dest-type"), "q"),
		chromedp.SendKeys(tid("bind-destination"), "invoices.us"),
		chromedp.SendKeys(tid("bind-routing-key"), "invoice.us.#"),
		chromedp.Click(tid("bind-submit")),
		waitText(tid("bind-status"), "Bound."),
		waitText(tid("bindings-from-table"), "invoice.us.#"),
	))

	publish := func(key, body, want string) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx,
			clear(tid("publish-routing-key")), clear(tid("publish-body")),
			chromedp.SendKeys(tid("publish-routing-key"), key),
			chromedp.SendKeys(tid("publish-body"), body),
			chromedp.Click(tid("publish-submit")),
			waitText(tid("publish-status"), want),
		))
	}
	publish("invoice.eu.42", "42 EUR", "Message published.")
	d := amqptest.Get(t, ch, "invoices.eu", true)
	require.Equal(t, "42 EUR", string(d.Body))
	require.Equal(t, "invoices", d.Exchange)
	require.Equal(t, "invoice.eu.42", d.RoutingKey)
	publish("invoice.us.ny.7", "7 USD", "Message published.")
	require.Equal(t, "7 USD", string(amqptest.Get(t, ch, "invoices.us", true).Body))

	// No binding matches: the API answers routed=false, and the page
	// says so.
	code, _, res := srv.Do("POST", "/api/exchanges/%2F/invoices/publish", "admin",
		map[string]any{"routing_key": "invoice.jp.1", "payload": "x", "payload_encoding": "string", "properties": map[string]any{}})
	require.Equal(t, http.StatusOK, code, "%s", res)
	require.JSONEq(t, `{"routed":false}`, string(res))
	publish("invoice.jp.1", "1 JPY", "Message published, but not routed.")
	amqptest.RequireEmpty(t, ch, "invoices.eu")
	amqptest.RequireEmpty(t, ch, "invoices.us")

	// Unbind the page's binding: it leaves the list and AMQP stops
	// routing by it.
	require.NoError(t, chromedp.Do(ctx,
		confirm(rowButton("", "invoice.us.#", "unbind")),
		waitGone(`//tr[contains(., "invoice.us.#")]`),
	))
	publish("invoice.us.ny.8", "8 USD", "Message published, but not routed.")
	amqptest.RequireEmpty(t, ch, "invoices.us")
	screenshot(t, ctx, artifacts(t), "exchange")
}

// TestConsoleConnectionsInBrowser: a connection amqp091-go opened with a
// client-provided name is listed under that name, its channels are listed
// with prefetch and unacked counts, and closing it from its page with a
// reason closes it as RabbitMQ's management UI does: the client gets
// connection.close 320 "CONNECTION_FORCED - <reason>".
func TestConsoleConnectionsInBrowser(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "admin", Tags: []string{"administrator"}}}})
	conn := amqptest.Dial(t, "amqp://admin:admin@127.0.0.1:5672/", amqp091.Config{
		Dial:       b.Dial,
		Properties: amqp091.Table{"connection_name": "billing-worker"},
	})
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	consumer := amqptest.Channel(t, conn) // channel 1: prefetch 7, two unacked
	require.NoError(t, consumer.Qos(7, 0, false))
	amqptest.DeclareQueue(t, consumer, "bills", false)
	pub := amqptest.Channel(t, conn) // channel 2: confirm mode
	amqptest.PublishConfirmed(t, pub, "bills", false, "bill 1", "bill 2")
	msgs, err := consumer.Consume("bills", "", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Next(t, msgs)
	amqptest.Next(t, msgs)

	ctx := browser(t, 1280, 800)
	row := tid("channel-row")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL()+"/"),
		login("admin", "admin"),
		chromedp.Click(tid("nav-connections")),
		waitText(tid("connection-row"), "billing-worker"),
		waitText(tid("connection-row"), "admin"),
		chromedp.Click(tid("nav-channels")),
		waitText(tid("channels-count"), "2 of 2 channels"),
		waitText(row, "(1)"),
		waitText(in(row, "channel-prefetch"), "7"),
		waitText(in(row, "channel-unacked"), "2"),
		waitText(tid("channels-table"), "confirm"),
	))
	screenshot(t, ctx, artifacts(t), "channels")

	// The channel's link opens its connection, whose page lists the same
	// channels; close it there with a reason.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(in(row, "channel-link")),
		waitText(tid("connection-details"), "admin"),
		waitText(tid("connection-client"), "billing-worker"),
		waitText(in(tid("connection-channels"), "channel-unacked"), "2"),
		clear(tid("close-reason")),
		chromedp.SendKeys(tid("close-reason"), "rotating credentials"),
		confirm(chromedp.Search(`//button[@data-testid="connection-close"]`)),
	))
	e := amqptest.AwaitClose(t, closed)
	require.Equal(t, amqp091.ConnectionForced, e.Code)
	require.Equal(t, "CONNECTION_FORCED - rotating credentials", e.Reason)
	require.NoError(t, chromedp.Do(ctx,
		waitText(tid("connections-list"), "No connections."),
	))
}

// TestConsoleAdminInBrowser: an administrator creates a vhost, a user with
// tags and a password, the user's permissions on the vhost, and a policy,
// all from the pages; each is checked through the API and over AMQP (the
// user logs in to the vhost, the policy's max-length caps a queue), a
// policymaker sees Policies but no admin pages, and deleting each from the
// page undoes it.
func TestConsoleAdminInBrowser(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "admin", Tags: []string{"administrator"}}}})
	ctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL()+"/"),
		login("admin", "admin"),
		chromedp.Click(tid("nav-vhosts")),
		waitText(tid("vhosts-table"), "/"),
		chromedp.SendKeys(tid("add-vhost-name"), "tenant-a"),
		chromedp.Click(tid("add-vhost-submit")),
		waitText(tid("add-vhost-status"), "Virtual host tenant-a added."),
		waitText(tid("vhosts-table"), "tenant-a"),
	))
	apiJSON(t, srv, "admin", "/api/vhosts/tenant-a", http.StatusOK)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("nav-users")),
		waitText(tid("users-table"), "admin"),
		chromedp.SendKeys(tid("add-user-name"), "alice"),
		chromedp.SendKeys(tid("add-user-password"), "alice-pw"),
		chromedp.SendKeys(tid("add-user-tags"), "management, policymaker"),
		chromedp.Click(tid("add-user-submit")),
		waitText(tid("add-user-status"), "User alice saved."),
		waitText(tid("users-table"), "alice"),
	))
	u := apiJSON(t, srv, "admin", "/api/users/alice", http.StatusOK)
	require.Equal(t, []any{"management", "policymaker"}, u["tags"])

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("nav-permissions")),
		waitText(tid("permissions-table"), "admin"),
		waitExists(`[data-testid="perm-vhost"] option[value="tenant-a"]`),
		chromedp.SendKeys(tid("perm-user"), "alice"),
		chromedp.SetValue(tid("perm-vhost"), "tenant-a"),
		clear(tid("perm-configure")),
		chromedp.SendKeys(tid("perm-configure"), "^capped\\."),
		chromedp.Click(tid("set-permission-submit")),
		waitText(tid("set-permission-status"), "Permissions set."),
		waitText(tid("permissions-table"), "tenant-a"),
	))
	p := apiJSON(t, srv, "admin", "/api/permissions/tenant-a/alice", http.StatusOK)
	require.Equal(t, `^capped\.`, p["configure"])
	require.Equal(t, ".*", p["write"])
	require.Equal(t, ".*", p["read"])

	// The new user logs in over AMQP to the new vhost with the password
	// set on the page, and may declare what the permissions allow.
	aliceURL := "amqp://alice:alice-pw@127.0.0.1:5672/tenant-a"
	conn := amqptest.Dial(t, aliceURL, amqp091.Config{Dial: b.Dial})
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "capped.q", false)
	_, err := ch.QueueDeclare("other.q", false, false, false, false, nil)
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
	ch = amqptest.Channel(t, conn)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("nav-policies")),
		waitText(tid("policies"), "None."),
		waitExists(`[data-testid="policy-vhost"] option[value="tenant-a"]`),
		chromedp.SetValue(tid("policy-vhost"), "tenant-a"),
		chromedp.SendKeys(tid("policy-name"), "cap"),
		clear(tid("policy-pattern")),
		chromedp.SendKeys(tid("policy-pattern"), "^capped\\."),
		chromedp.SetValue(tid("policy-apply-to"), "queues"),
		chromedp.SendKeys(tid("policy-definition"), `{"max-length": 2}`),
		chromedp.Click(tid("add-policy-submit")),
		waitText(tid("add-policy-status"), "Policy cap saved."),
		waitText(tid("policies-table"), "max-length"),
	))
	pol := apiJSON(t, srv, "admin", "/api/policies/tenant-a/cap", http.StatusOK)
	require.Equal(t, "queues", pol["apply-to"])
	require.Equal(t, map[string]any{"max-length": float64(2)}, pol["definition"])
	amqptest.PublishConfirmed(t, ch, "capped.q", false, amqptest.Numbered("m", 5)...)
	q, err := ch.QueueDeclarePassive("capped.q", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 2, q.Messages, "the policy's max-length applies")

	// A policymaker sees Policies but none of the administrator's pages.
	hidden := func(nav string) bool {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector('[data-testid=%q]').closest('li').hidden`, nav)))
		require.NoError(t, err)
		return v
	}
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("logout")),
		login("alice", "alice-pw"),
	))
	for nav, want := range map[string]bool{"nav-vhosts": true, "nav-users": true, "nav-permissions": true, "nav-policies": false} {
		require.Equal(t, want, hidden(nav), nav)
	}
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("nav-policies")),
		waitText(tid("policies-table"), "cap"),
		chromedp.Click(tid("logout")),
		login("admin", "admin"),
	))

	// Delete the policy, pressing its button once before a refresh of the
	// list (r refreshes at once) and once after: the refresh, which redraws
	// the rows, must not disarm it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("nav-policies")),
		waitText(tid("policies-table"), "cap"),
		refreshed(chromedp.Click(rowButton("policy-row", "cap", "policy-delete")), chromedp.KeyEvent("r")),
		waitText(in(tid("policy-row"), "policy-delete"), "Really delete?"),
		chromedp.Click(rowButton("policy-row", "cap", "policy-delete")),
		waitText(tid("policies"), "None."),
	))
	apiJSON(t, srv, "admin", "/api/policies/tenant-a/cap", http.StatusNotFound)
	amqptest.PublishConfirmed(t, ch, "capped.q", false, amqptest.Numbered("n", 3)...)
	q, err = ch.QueueDeclarePassive("capped.q", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 5, q.Messages, "no cap once the policy is gone")

	// Clear the permissions: alice can no longer open the vhost.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("nav-permissions")),
		waitText(tid("permissions-table"), "alice"),
		confirm(rowButton("permission-row", "alice", "permission-delete")),
		waitGone(`//tr[@data-testid="permission-row"][contains(., "alice")]`),
	))
	apiJSON(t, srv, "admin", "/api/permissions/tenant-a/alice", http.StatusNotFound)
	_, err = amqp091.DialConfig(aliceURL, amqp091.Config{Dial: b.Dial})
	require.Error(t, err, "alice opens tenant-a without permissions")

	// Delete the user and the vhost.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("nav-users")),
		waitText(tid("users-table"), "alice"),
		confirm(rowButton("user-row", "alice", "user-delete")),
		waitGone(`//tr[@data-testid="user-row"][contains(., "alice")]`),
		chromedp.Click(tid("nav-vhosts")),
		waitText(tid("vhosts-table"), "tenant-a"),
		confirm(rowButton("vhost-row", "tenant-a", "vhost-delete")),
		waitGone(`//tr[@data-testid="vhost-row"][contains(., "tenant-a")]`),
	))
	apiJSON(t, srv, "admin", "/api/users/alice", http.StatusNotFound)
	apiJSON(t, srv, "admin", "/api/vhosts/tenant-a", http.StatusNotFound)
	_, err = amqp091.DialConfig("amqp://admin:admin@127.0.0.1:5672/tenant-a", amqp091.Config{Dial: b.Dial})
	require.Error(t, err, "tenant-a still opens")
}
