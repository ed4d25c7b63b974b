package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// scaleEnv turns on TestConsoleScaleReport, a measurement rather than a
// check: WARREN_CONSOLE_SCALE=10000 go test -run ScaleReport -v
// ./internal/console/ (docs/console.md quotes its numbers).
const scaleEnv = "WARREN_CONSOLE_SCALE"

// cpuTime is this process's user and system CPU time so far.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestConsoleScaleReport reports, for a broker with N queues, how long the
// console's queues page takes to show its first page, what one API call
// behind it costs against the unpaged listing, and the broker's CPU while
// a console sits open and refreshing on the queues page and on the
// overview (the browser is another process: the CPU measured is the
// broker's, with this test's idle harness). It asserts nothing about
// time.
func TestConsoleScaleReport(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(scaleEnv))
	if n <= 0 {
		t.Skipf("a measurement: set %s to a queue count to run it", scaleEnv)
	}
	window := 30 * time.Second
	if s := os.Getenv("WARREN_CONSOLE_SCALE_WINDOW"); s != "" {
		var err error
		window, err = time.ParseDuration(s)
		require.NoError(t, err)
	}
	b, err := broker.New(broker.Options{Users: []broker.User{{Name: "admin", Password: "s3cret", Tags: []string{"administrator"}}}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	ch := brokertest.Channel(t, b)
	for i := range n {
		name := fmt.Sprintf("queue-%05d", i)
		_, err := ch.QueueDeclare(name, false, false, false, false, nil)
		require.NoError(t, err)
		if i%10 == 0 {
			require.NoError(t, ch.Publish("", name, false, false, amqp091.Publishing{Body: []byte("x")}))
		}
	}
	amqptest.Idle(t, b.WaitIdle)
	srv := httptest.NewServer(b.ManagementHandler())
	t.Cleanup(srv.Close)

	// One API call of each kind, as the page makes them.
	call := func(path string) (time.Duration, int) {
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth("admin", "s3cret")
		start := time.Now()
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var size int
		buf := make([]byte, 64<<10)
		for {
			k, err := resp.Body.Read(buf)
			size += k
			if err != nil {
				break
			}
		}
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return time.Since(start), size
	}
	for _, path := range []string{"/api/queues?page=1&page_size=50", "/api/queues?page=200&page_size=50&name=queue-0&sort=name",
		"/api/queues?page=1&page_size=50&sort=messages&sort_reverse=true",
		"/api/queues?page=1&page_size=50&sort=message_stats.publish_details.rate&sort_reverse=true", "/api/overview", "/api/queues"} {
		call(path) // warm
		var total time.Duration
		var size int
		const reps = 5
		for range reps {
			d, s := call(path)
			total += d
			size = s
		}
		t.Logf("GET %-62s %8.1f ms  %9d bytes", path, float64(total.Microseconds())/1000/reps, size)
	}

	ctx := browser(t, 1280, 800)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), login("admin", "s3cret")))
	idleStart, idleCPU := time.Now(), cpuTime(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#/connections")))
	time.Sleep(window / 3) // a page whose refresh costs next to nothing, as the baseline
	t.Logf("broker CPU, console open on connections (baseline): %.1f%% of one core", 100*float64(cpuTime(t)-idleCPU)/float64(time.Since(idleStart)))

	for range 3 {
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(srv.URL+"/#/"),
			waitText(tid("total-queues"), strconv.Itoa(n)[:1]),
		))
		start := time.Now()
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Click(tid("nav-queues")),
			waitText(tid("queues-count"), "of "+strconv.Itoa(n)[:1]),
		))
		loadMS, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="queues"]').dataset.loadMs`))
		require.NoError(t, err)
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="queue-row"]').length`))
		require.NoError(t, err)
		t.Logf("queues page: %d rows shown %.0f ms after the click (fetch and render %s ms)", rows, float64(time.Since(start).Milliseconds()), loadMS)
	}
	for _, page := range []string{"queues", ""} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/#/"+page)))
		time.Sleep(time.Second)
		start, cpu := time.Now(), cpuTime(t)
		time.Sleep(window)
		t.Logf("broker CPU, console open on %q refreshing every 5 s for %v: %.1f%% of one core",
			"#/"+page, window, 100*float64(cpuTime(t)-cpu)/float64(time.Since(start)))
	}
}
