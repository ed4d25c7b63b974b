package console_test

import (
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// attackerPage is another site's page that posts a form to action as soon
// as it loads, the way a page an administrator is lured to would: enctype
// text/plain writes "name=value", so a name holding JSON up to a last
// string that the "=" and value close makes the body a JSON document;
// multipart sends the same JSON as a "file" field, RabbitMQ's upload.
func attackerPage(action, enctype, definitions string) string {
	var field string
	switch enctype {
	case "text/plain":
		// body: {...,"x":"="}
		name := strings.TrimSuffix(definitions, "}") + `,"x":"`
		field = fmt.Sprintf(`<input type="hidden" name="%s" value='"}'>`, html.EscapeString(name))
	case "multipart/form-data":
		field = fmt.Sprintf(`<textarea name="file">%s</textarea>`, html.EscapeString(definitions))
	}
	return fmt.Sprintf(`<!doctype html><html><body onload="document.forms[0].submit()">
<form method="POST" action="%s" enctype="%s">%s</form></body></html>`, html.EscapeString(action), enctype, field)
}

// TestConsoleCrossSiteFormRefused: in Chromium, after one visit to an API
// URL with basic auth (the browser keeps the credentials and sends them
// with later requests to the API), a page of another site that submits a
// form to POST /api/definitions creates no user: the text/plain form is
// 415 and refused as cross-origin, the multipart one (a type the
// definitions upload takes) is refused as cross-origin. Both created an
// administrator before. The console itself, same-origin, still writes.
func TestConsoleCrossSiteFormRefused(t *testing.T) {
	_, srv := serveConsole(t, broker.Options{Users: []broker.User{
		{Name: "admin", Password: "s3cret", Tags: []string{"administrator"}},
		{Name: "admin-check", Password: "admin-check", Tags: []string{"administrator"}}, // the test's own API calls
	}})

	// Another site: another address (127.0.0.2 is another host to the
	// browser, so the request is cross-site, not just cross-origin).
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	evil := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.URL.Query().Get("user")
		defs := fmt.Sprintf(`{"users":[{"name":%q,"password":"pw","tags":"administrator"}]}`, user)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, attackerPage(srv.URL()+"/api/definitions", r.URL.Query().Get("enctype"), defs))
	}))
	evil.Listener.Close()
	evil.Listener = ln
	evil.Start()
	t.Cleanup(evil.Close)

	ctx := browser(t, 1280, 800)
	api := strings.Replace(srv.URL(), "http://", "http://admin:s3cret@", 1)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(api+"/api/whoami"),
		waitText("body", `"name":"admin"`),
	))
	for _, tc := range []struct{ enctype, user, refusal string }{
		{"text/plain", "evil-plain", "cross-origin request refused"},
		{"multipart/form-data", "evil-multipart", "cross-origin request refused"},
	} {
		t.Run(tc.enctype, func(t *testing.T) {
			created := func() bool {
				code, _, _ := srv.Do("GET", "/api/users/"+tc.user, "admin-check", nil)
				return code == http.StatusOK
			}
			// The form's answer replaces the page, unless it is a 204
			// (the import went through), which leaves the page as it was.
			require.NoError(t, chromedp.Do(ctx,
				chromedp.Navigate(evil.URL+"/?enctype="+tc.enctype+"&user="+tc.user),
				waitUntil(func(ctx context.Context, tab *chromedp.Target) bool {
					at, err := chromedp.Evaluate[string](`location.href`)(ctx, tab)
					return err == nil && strings.HasPrefix(at, srv.URL()+"/api/definitions") || created()
				}),
			))
			require.False(t, created(), "the other site's form created an administrator")
			require.NoError(t, chromedp.Do(ctx, waitText("body", tc.refusal)))
		})
	}

	// The same browser, on the console: its writes are same-origin.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL()+"/"),
		login("admin", "s3cret"),
		chromedp.Click(tid("nav-vhosts")),
		chromedp.SendKeys(tid("add-vhost-name"), "from-console"),
		chromedp.Click(tid("add-vhost-submit")),
		waitText(tid("add-vhost-status"), "Virtual host from-console added."),
	))
	code, _, _ := srv.Do("GET", "/api/vhosts/from-console", "admin-check", nil)
	require.Equal(t, http.StatusOK, code)
}

// waitUntil polls done until it reports true.
func waitUntil(done func(ctx context.Context, tab *chromedp.Target) bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tab *chromedp.Target) error {
		for !done(ctx, tab) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting: %w", ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		return nil
	})
}
