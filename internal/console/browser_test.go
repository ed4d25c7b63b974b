package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/console"
)

// skipEnv names the variable a developer without Chromium sets to skip the
// browser tests. CI (CI=true) never skips: scripts/install-deps.sh installs
// Debian's chromium there.
const skipEnv = "WARREN_CONSOLE_SKIP_WITHOUT_CHROMIUM"

// artifactsEnv names a directory for the screenshots; without it they go
// to a new temporary directory, which the test logs and leaves in place.
const artifactsEnv = "WARREN_CONSOLE_ARTIFACTS"

// chromium finds a Chromium or Chrome binary: $WARREN_CHROMIUM, else the
// first of Debian's names on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WARREN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	err := fmt.Errorf("no Chromium on PATH: apt-get install chromium (scripts/install-deps.sh) or set WARREN_CHROMIUM")
	if os.Getenv("CI") != "true" && os.Getenv(skipEnv) != "" {
		t.Skipf("%v (skipped: %s is set)", err, skipEnv)
	}
	t.Fatalf("%v; outside CI, set %s=1 to skip", err, skipEnv)
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// chromedp context for one tab, cancelled (and the browser stopped) on
// cleanup.
func browser(t *testing.T, width, height int) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx)) // starts the browser, which lives as long as ctx
	// Every later step is bounded: a console that never shows what the
	// test waits for fails the test instead of hanging it. The bound is
	// generous: a whole test takes 13 s on an idle machine, and a loaded
	// one (the race detector, other packages' tests) once took over 90.
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancelTimeout)
	return ctx
}

// artifacts is the directory screenshots go to.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(artifactsEnv)
	if dir == "" {
		var err error
		dir, err = os.MkdirTemp("", "warren-console-screenshots-")
		require.NoError(t, err)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)
	return dir
}

// screenshot saves the tab's viewport as dir/name.png.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// tid is the CSS selector of a data-testid.
func tid(id string) chromedp.CSS { return chromedp.CSS(`[data-testid="` + id + `"]`) }

// in is the CSS selector of the element testid inside the first match of
// outer.
func in(outer chromedp.CSS, id string) chromedp.CSS { return outer + " " + tid(id) }

// waitText waits until the element the selector finds has text containing
// want (the page refreshes on its own; this waits for it, it does not
// sleep).
func waitText(selector chromedp.CSS, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tab *chromedp.Target) error {
		for {
			got, err := chromedp.Evaluate[string](fmt.Sprintf(
				`(() => { const e = document.querySelector(%q); return e ? e.innerText : '' })()`, string(selector)))(ctx, tab)
			if err == nil && strings.Contains(got, want) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s to contain %q (last %q): %w", selector, want, got, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// waitExists waits until selector matches an element.
func waitExists(selector string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tab *chromedp.Target) error {
		for {
			found, err := chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q) !== null`, selector))(ctx, tab)
			if err == nil && found {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", selector, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// clear empties an input (chromedp's SetValue refuses "").
func clear(selector chromedp.CSS) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tab *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { document.querySelector(%q).value = ''; return true })()`, string(selector)))(ctx, tab)
		return err
	})
}

// blur takes the focus off whatever has it, as a click on the page's
// background does.
func blur() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tab *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(() => { if (document.activeElement) document.activeElement.blur(); return true })()`)(ctx, tab)
		return err
	})
}

// serveConsole starts a broker with opts and serves its management
// handler (the console at /, the API under /api/) on an httptest server
// whose URL() the browser opens and whose Do() checks what the page did;
// both close on cleanup. Do logs in with password = user name.
func serveConsole(t *testing.T, opts broker.Options) (*broker.Broker, *amqptest.API) {
	t.Helper()
	b, err := broker.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b, amqptest.NewAPI(t, b.ManagementHandler())
}

// login fills the login form and waits for the overview.
func login(user, password string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.WaitVisible(tid("login-username")),
		clear(tid("login-username")),
		clear(tid("login-password")),
		chromedp.SendKeys(tid("login-username"), user),
		chromedp.SendKeys(tid("login-password"), password),
		chromedp.Click(tid("login-submit")),
		chromedp.WaitVisible(tid("nav-queues")),
		waitText(tid("whoami"), user),
	)
}

// TestConsoleInBrowser drives the console in headless Chromium through
// what a user does first: log in, see a queue created over AMQP with its
// depth, open it, publish and get a message through the page, purge it,
// and see a non-administrator refused the users page. Screenshots of
// each step are saved (artifacts).
func TestConsoleInBrowser(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{
		{Name: "admin", Password: "s3cret", Tags: []string{"administrator"}},
		{Name: "viewer", Password: "viewer", Tags: []string{"management"}},
	}, Management: broker.ManagementOptions{StatsInterval: 100 * time.Millisecond}}) // charts fill in seconds

	// A queue made over AMQP, with three messages in it.
	conn := amqptest.Dial(t, "amqp://admin:s3cret@127.0.0.1:5672/", amqp091.Config{Dial: b.Dial})
	ch := amqptest.Channel(t, conn)
	_, err := ch.QueueDeclare("orders", true, false, false, false, nil)
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, ch.Publish("", "orders", false, false, amqp091.Publishing{Body: fmt.Appendf(nil, "order %d", i)}))
	}
	amqptest.Idle(t, b.WaitIdle)

	dir := artifacts(t)
	ctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL()+"/"),
		login("admin", "s3cret"),
		waitText(tid("total-messages"), "3"),
		// The broker's own history: two samples 5 s apart (the page asks
		// for one per 5 s) draw the depth and rate lines.
		waitExists(`[data-testid="chart-depth"] svg polyline`),
	))
	screenshot(t, ctx, dir, "overview")

	// The queues page lists the queue with its depth.
	row := tid("queue-row")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("nav-queues")),
		waitText(row, "orders"),
		waitText(in(row, "queue-ready"), "3"),
		waitText(in(row, "queue-unacked"), "0"),
	))
	screenshot(t, ctx, dir, "queues")

	// Open it, publish a message, get it back.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(row+" a"),
		waitText(tid("queue-name"), "orders"),
		chromedp.SendKeys(tid("publish-body"), "hello from the browser"),
		chromedp.Click(tid("publish-submit")),
		waitText(tid("publish-status"), "Message published."),
		waitText(in(tid("queue-summary"), "queue-ready"), "4"),
		chromedp.SetValue(tid("get-ackmode"), "ack_requeue_true"),
		chromedp.SetValue(tid("get-count"), "4"),
		chromedp.Click(tid("get-submit")),
		waitText(tid("get-result"), "hello from the browser"),
		waitText(tid("get-result"), "order 0"),
		waitText(in(tid("queue-summary"), "queue-ready"), "4"),
		// The queue's history starts when its page first asks for it.
		waitExists(`[data-testid="chart-queue-depth"] svg polyline`),
	))
	screenshot(t, ctx, dir, "queue")

	// On a phone's screen the page does not scroll sideways (wide tables
	// scroll inside their own box).
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Click(tid("nav-queues")),
		waitText(in(row, "queue-ready"), "4"),
	))
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	require.NoError(t, err)
	require.LessOrEqual(t, overflow, 0, "the queues page scrolls sideways on a phone")
	screenshot(t, ctx, dir, "queues-phone")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Click(row+" a"),
		waitText(tid("queue-name"), "orders"),
	))

	// Purge (two presses) empties it, as AMQP sees.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("queue-purge")),
		chromedp.Click(tid("queue-purge")),
		waitText(in(tid("queue-summary"), "queue-ready"), "0"),
	))
	q, err := ch.QueueDeclarePassive("orders", true, false, false, false, nil)
	require.NoError(t, err)
	require.Zero(t, q.Messages)

	// A management user sees no admin pages in the menu, and the users
	// page itself is refused by the API.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("logout")),
		login("viewer", "viewer"),
	))
	usersHidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid="nav-users"]').closest('li').hidden`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL()+"/#/users"),
		chromedp.WaitVisible(tid("access-denied")),
		waitText(tid("access-denied"), "Not administrator user"),
	))
	require.True(t, usersHidden, "the users page is in a management user's menu")
	screenshot(t, ctx, dir, "denied")

	// A wrong password stays on the login form with the API's reason.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("logout")),
		chromedp.WaitVisible(tid("login-username")),
		chromedp.SendKeys(tid("login-username"), "admin"),
		chromedp.SendKeys(tid("login-password"), "wrong"),
		chromedp.Click(tid("login-submit")),
		waitText(tid("login-error"), "Login failed"),
	))
}

// samplesAPI is a management API that answers the overview with rate
// history in the shape the console reads (RabbitMQ's *_details with
// samples, newest first): publish grows by 50 every 5 s (10/s), and 120
// messages are ready throughout.
func samplesAPI() http.Handler {
	details := func(step float64) map[string]any {
		now := time.Now().UnixMilli()
		var samples []map[string]any
		for i := range 10 {
			samples = append(samples, map[string]any{"sample": step * float64(10-i), "timestamp": now - int64(i)*5000})
		}
		return map[string]any{"rate": step / 5, "samples": samples, "avg_rate": step / 5, "avg": step * 5}
	}
	gauge := func(v float64) map[string]any {
		now := time.Now().UnixMilli()
		var samples []map[string]any
		for i := range 10 {
			samples = append(samples, map[string]any{"sample": v, "timestamp": now - int64(i)*5000})
		}
		return map[string]any{"rate": 0.0, "samples": samples, "avg_rate": 0.0, "avg": v}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		switch r.URL.Path {
		case "/api/whoami":
			v = map[string]any{"name": "admin", "tags": []string{"administrator"}}
		case "/api/nodes":
			v = []map[string]any{{"name": "warren@test", "running": true, "mem_used": 64 << 20, "mem_message_bytes": 1 << 20, "mem_limit": 1 << 30}}
		case "/api/overview":
			if r.URL.Query().Get("msg_rates_age") != "600" || r.URL.Query().Get("lengths_incr") != "5" {
				http.Error(w, `{"error":"bad_request","reason":"no history asked for"}`, http.StatusBadRequest)
				return
			}
			v = map[string]any{
				"cluster_name": "test", "rabbitmq_version": "4.1.0",
				"message_stats": map[string]any{"publish": 500, "publish_details": details(50)},
				"queue_totals": map[string]any{"messages_ready": 120, "messages_ready_details": gauge(120),
					"messages_unacknowledged": 0, "messages_unacknowledged_details": gauge(0),
					"messages": 120, "messages_details": gauge(120)},
				"object_totals": map[string]any{"queues": 1},
			}
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// TestConsoleChartsInBrowser: the overview's charts draw the API's
// samples as rates (counter differences over time) and lengths, with the
// latest value in the legend. With nothing unacked, Ready and Total are
// the same line: Total is drawn first as a wide pale band and Ready over
// it, so both show (Total used to be drawn last, over Ready, at the same
// width); a legend entry turns its line off, and a refresh keeps it off.
// #/overview is the overview too (it was "Not found"). The nodes table
// shows the process's memory beside the message memory the alarm watches.
func TestConsoleChartsInBrowser(t *testing.T) {
	srv := httptest.NewServer(console.Handler(samplesAPI()))
	t.Cleanup(srv.Close)
	ctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		login("admin", "admin"),
		waitText(tid("chart-rates"), "Publish 10/s"),
		waitText(tid("chart-depth"), "Ready 120"),
		// The process's memory, and the message bytes the alarm watches.
		waitText(in(tid("nodes-table"), "node-memory"), "64.0 MiB"),
		waitText(in(tid("nodes-table"), "node-message-memory"), "1.0 MiB of 1.0 GiB"),
	))
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="chart-rates"] svg polyline').length`))
	require.NoError(t, err)
	require.Equal(t, 1, lines, "one line: the only counter with samples")
	noData, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="chart-nodata"]').length`))
	require.NoError(t, err)
	require.Zero(t, noData)

	type line struct {
		Series string  `json:"series"`
		Width  float64 `json:"width"`
	}
	depthLines := func() []line {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]line](`[...document.querySelectorAll('[data-testid="chart-depth"] svg polyline')]
			.filter((p) => p.getAttribute('visibility') !== 'hidden')
			.map((p) => ({series: p.dataset.series, width: +getComputedStyle(p).strokeWidth.replace('px', '')}))`))
		require.NoError(t, err)
		return v
	}
	lines3 := depthLines()
	require.Len(t, lines3, 3)
	require.Equal(t, "messages", lines3[0].Series, "Total is drawn first, under Ready and Unacked")
	require.Equal(t, "messages_ready", lines3[1].Series)
	require.Greater(t, lines3[0].Width, lines3[1].Width, "Total is not wider than the Ready line drawn over it")
	screenshot(t, ctx, artifacts(t), "overview-charts")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(tid("chart-toggle-messages")),
		waitExists(`[data-testid="chart-toggle-messages"][aria-pressed="false"]`),
		refreshed(chromedp.KeyEvent("r")),
	))
	var series []string
	for _, l := range depthLines() {
		series = append(series, l.Series)
	}
	require.Equal(t, []string{"messages_ready", "messages_unacknowledged"}, series, "Total turned off stays off after a refresh")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/overview"),
		waitText("#page h1", "Overview"),
		waitText(tid("chart-depth"), "Ready 120"),
	))
}

// TestConsoleNavigateDuringRefresh: a page opened while the previous
// page's refresh is still waiting on the API loads at once (it once waited
// for the previous refresh and, with refresh off, never loaded).
func TestConsoleNavigateDuringRefresh(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		switch r.URL.Path {
		case "/api/whoami":
			v = map[string]any{"name": "admin", "tags": []string{"administrator"}}
		case "/api/overview":
			select { // held until the test ends
			case <-release:
			case <-r.Context().Done():
			}
			v = map[string]any{}
		case "/api/queues":
			v = map[string]any{"filtered_count": 1, "item_count": 1, "page": 1, "page_count": 1, "page_size": 50, "total_count": 1,
				"items": []map[string]any{{"name": "slow-day", "vhost": "/", "type": "classic", "state": "running", "messages_ready": 7, "messages_unacknowledged": 0}}}
		case "/api/vhosts":
			v = []map[string]any{{"name": "/"}}
		default:
			v = []any{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
	srv := httptest.NewServer(console.Handler(api))
	t.Cleanup(srv.Close)
	ctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		login("admin", "admin"),
		chromedp.SetValue(tid("refresh-interval"), "0"),
		chromedp.Click(tid("nav-queues")),
		waitText(tid("queue-row"), "slow-day"),
		waitText(in(tid("queue-row"), "queue-ready"), "7"),
	))
}

// TestConsoleKeyboard: the console is usable without a mouse: Tab from the
// top reaches the skip link first, g then q opens the queues page, / puts
// the cursor in its filter, j focuses the first row's link and Enter
// opens the queue.
func TestConsoleKeyboard(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{{Name: "admin", Password: "s3cret", Tags: []string{"administrator"}}}})
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("keyed", false, false, false, false, nil)
	require.NoError(t, err)

	ctx := browser(t, 1280, 800)
	focused := func() string {
		t.Helper()
		id, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement ? (document.activeElement.dataset.testid || document.activeElement.id || document.activeElement.tagName) : ''`))
		require.NoError(t, err)
		return id
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL()+"/"), login("admin", "s3cret"),
		blur(),
		chromedp.KeyEvent("\t")))
	require.Equal(t, "skip-link", focused())
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("gq"),
		waitText(tid("queue-row"), "keyed"),
		chromedp.KeyEvent("/"),
	))
	require.Equal(t, "queues-filter", focused())
	require.NoError(t, chromedp.Do(ctx,
		blur(),
		chromedp.KeyEvent("j"),
	))
	require.Equal(t, "queue-link", focused())
	require.NoError(t, chromedp.Do(ctx,
		chromedp.KeyEvent("\r"),
		waitText(tid("queue-name"), "keyed"),
	))
}
