package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/metrics/promtest"
)

// users are the accounts of the brokers these tests start: one per tag
// that matters to Authenticate, password = name.
var users = []broker.User{
	{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
	{Name: "mon", Password: "mon", Tags: []string{"monitoring"}},
	{Name: "mgr", Password: "mgr", Tags: []string{"management"}},
	{Name: "app", Password: "app"},
}

// request sends method to url as user (password = user name; "" sends no
// credentials) and returns the status and body.
func request(t *testing.T, method, url, user string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, user)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

// TestMetricsScrape scrapes a broker with traffic through a real client:
// every family parses strictly, the counts match what the test did, a
// queue name needing every escape comes out escaped, and POST is 405.
func TestMetricsScrape(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{Users: users})
	conn := brokertest.Dial(t, b)
	ch := amqptest.Channel(t, conn)
	// A queue name that needs every escape the format has. A declare
	// drops its line feed, as RabbitMQ's does; a definitions import keeps
	// it (also as RabbitMQ's does).
	odd := "odd \"q\"\\\nname"
	_, err := ch.QueueDeclare("plain", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, b.Admin().Import(context.Background(), &definitions.File{
		Queues: []definitions.Queue{{Name: odd, VHost: "/"}},
	}))
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4))
	for range 3 {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "plain", false, false, amqp091.Publishing{Body: []byte("x")}))
	}
	require.NoError(t, ch.PublishWithContext(context.Background(), "", odd, false, false, amqp91Body("y")))
	for range 4 {
		require.True(t, (<-confirms).Ack)
	}
	c2 := amqptest.Channel(t, conn)
	require.NoError(t, c2.Qos(2, 0, false))
	_, err = c2.Consume("plain", "", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Idle(t, b.WaitIdle)

	fams := promtest.Scrape(t, b.MetricsHandler(broker.MetricsOptions{PerObject: true}))
	value := func(name, labels string) float64 {
		t.Helper()
		f, ok := fams[name]
		require.True(t, ok, "family %s", name)
		v, ok := f.Samples[labels]
		require.True(t, ok, "%s{%s} in %v", name, labels, f.Samples)
		return v
	}
	plain := `queue="plain",vhost="/"`
	oddLabels := `queue=` + strconv.Quote(odd) + `,vhost="/"`
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"rabbitmq_connections", "", 1},
		{"rabbitmq_channels", "", 2},
		{"rabbitmq_consumers", "", 1},
		{"rabbitmq_queues", "", 2},
		{"rabbitmq_queue_messages_ready", plain, 1},
		{"rabbitmq_queue_messages_unacked", plain, 2},
		{"rabbitmq_queue_consumers", plain, 1},
		{"rabbitmq_queue_messages_ready", oddLabels, 1},
		{"rabbitmq_queue_messages_published_total", plain, 3},
		{"rabbitmq_queue_messages_delivered_total", plain, 2},
		{"rabbitmq_global_messages_received_total", "", 4},
		{"rabbitmq_global_messages_routed_total", "", 4},
		{"rabbitmq_global_messages_confirmed_total", "", 4},
		{"rabbitmq_global_messages_delivered_total", "", 2},
		{"rabbitmq_global_messages_delivered_consume_manual_ack_total", "", 2},
		{"rabbitmq_global_messages_acknowledged_total", "", 0},
		{"rabbitmq_global_messages_redelivered_total", "", 0},
		{"rabbitmq_connections_opened_total", "", 1},
		{"rabbitmq_channels_opened_total", "", 2},
	} {
		require.Equal(t, c.want, value(c.name, c.labels), "%s{%s}", c.name, c.labels)
	}
	require.Positive(t, value("go_goroutines", ""))
	require.Positive(t, value("go_memstats_alloc_bytes", ""))
	require.Positive(t, value("process_start_time_seconds", ""))
	require.Equal(t, "gauge", fams["rabbitmq_queue_messages_ready"].Type)
	require.Equal(t, "counter", fams["rabbitmq_global_messages_received_total"].Type)
	require.NotContains(t, fams, "warren_store_disk_bytes", "in-memory brokers have no store on disk")

	srv := httptest.NewServer(b.MetricsHandler(broker.MetricsOptions{}))
	defer srv.Close()
	status, _ := request(t, "POST", srv.URL+"/metrics", "")
	require.Equal(t, http.StatusMethodNotAllowed, status)
}

func amqp91Body(s string) amqp091.Publishing { return amqp091.Publishing{Body: []byte(s)} }

// TestMetricsStoreSize: a broker with a DataDir reports the size of its
// files.
func TestMetricsStoreSize(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{DataDir: t.TempDir()})
	fams := promtest.Scrape(t, b.MetricsHandler(broker.MetricsOptions{}))
	require.Positive(t, fams["warren_store_disk_bytes"].Samples[""])
}

// TestMetricsDeadLettered checks RabbitMQ 3.10's dead-lettering counters:
// one family per reason, labelled queue_type and dead_letter_strategy
// (at_most_once with a dead-letter exchange, disabled without).
func TestMetricsDeadLettered(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{Users: users})
	conn := brokertest.Dial(t, b)
	ch := amqptest.Channel(t, conn)
	ctx := context.Background()
	dlx := amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dl.dst"}
	with := func(base amqp091.Table, kv ...any) amqp091.Table {
		out := amqp091.Table{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	for name, args := range map[string]amqp091.Table{
		"dl.dst":    nil,
		"dl.ttl":    with(dlx, "x-message-ttl", int32(0)),
		"dl.len":    with(dlx, "x-max-length", int32(1)),
		"dl.rej":    dlx,
		"dl.lim":    with(dlx, "x-delivery-limit", int32(0)),
		"plain.rej": nil,
		"plain.len": {"x-max-length": int32(1)},
		"plain.rpd": {"x-max-length": int32(0), "x-overflow": "reject-publish-dlx"},
	} {
		_, err := ch.QueueDeclare(name, false, false, false, false, args)
		require.NoError(t, err, name)
	}
	publish := func(q string, n int) {
		for range n {
			require.NoError(t, ch.PublishWithContext(ctx, "", q, false, false, amqp91Body("m")))
		}
	}
	publish("dl.ttl", 2)
	publish("dl.len", 3)
	publish("plain.len", 2)
	publish("plain.rpd", 1)
	publish("dl.rej", 1)
	publish("dl.lim", 1)
	publish("plain.rej", 1)
	amqptest.Idle(t, b.WaitIdle)
	getOne := func(q string) amqp091.Delivery {
		d, ok, err := ch.Get(q, false)
		require.NoError(t, err)
		require.True(t, ok, q)
		return d
	}
	require.NoError(t, getOne("dl.rej").Nack(false, false))
	require.NoError(t, getOne("dl.lim").Nack(false, true), "delivered once, over the limit of 0")
	require.NoError(t, getOne("plain.rej").Reject(false))
	amqptest.Idle(t, b.WaitIdle)

	fams := promtest.Scrape(t, b.MetricsHandler(broker.MetricsOptions{PerObject: true}))
	labels := func(strategy string) string {
		return `dead_letter_strategy="` + strategy + `",queue_type="rabbit_classic_queue"`
	}
	for _, c := range []struct {
		reason   string
		dlx, off float64
	}{
		{"expired", 2, 0},
		{"rejected", 1, 1},
		{"maxlen", 2, 2},
		{"delivery_limit", 1, 0},
	} {
		f, ok := fams["rabbitmq_global_messages_dead_lettered_"+c.reason+"_total"]
		require.True(t, ok, c.reason)
		require.Equal(t, "counter", f.Type)
		require.Equal(t, map[string]float64{labels("at_most_once"): c.dlx, labels("disabled"): c.off}, f.Samples, c.reason)
	}
	require.Equal(t, float64(6), fams["rabbitmq_queue_messages_ready"].Samples[`queue="dl.dst",vhost="/"`], "every at_most_once death was routed")
}

// TestMetricsDefaultNamesNothing: the default handler, meant to be open,
// sums the queue metrics and names no vhost or queue; the per-object view
// names them, and with Authenticate only administrator and monitoring
// users get it.
func TestMetricsDefaultNamesNothing(t *testing.T) {
	ctx := context.Background()
	b := brokertest.NewUnstarted(t, broker.Options{VHosts: []string{"/", "hidden-vhost"}, Users: users})
	conn, err := amqp091.DialConfig("amqp://guest:guest@127.0.0.1:5672/hidden-vhost", amqp091.Config{Dial: b.Dial})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch := amqptest.Channel(t, conn)
	for _, q := range []string{"secret-queue-a", "secret-queue-b"} {
		_, err := ch.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.PublishWithContext(ctx, "", q, false, false, amqp91Body("x")))
	}
	amqptest.Idle(t, b.WaitIdle)

	srv := httptest.NewServer(b.MetricsHandler(broker.MetricsOptions{}))
	defer srv.Close()
	status, body := request(t, "GET", srv.URL+"/metrics", "")
	require.Equal(t, http.StatusOK, status)
	for _, name := range []string{"hidden-vhost", "secret-queue", "guest"} {
		require.NotContains(t, string(body), name)
	}
	fams, err := promtest.Parse(string(body))
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"": 2}, fams["rabbitmq_queue_messages_ready"].Samples, "summed over the queues")
	require.Equal(t, map[string]float64{"": 2}, fams["rabbitmq_queue_messages_published_total"].Samples)

	per := httptest.NewServer(b.MetricsHandler(broker.MetricsOptions{PerObject: true, Authenticate: true}))
	defer per.Close()
	for _, tc := range []struct {
		user   string
		status int
	}{{"", 401}, {"nobody", 401}, {"app", 401}, {"mgr", 401}, {"mon", 200}, {"guest", 200}} {
		status, body := request(t, "GET", per.URL+"/metrics/per-object", tc.user)
		require.Equal(t, tc.status, status, "user %q: %s", tc.user, body)
		if status == 200 {
			require.Contains(t, string(body), `rabbitmq_queue_messages_ready{vhost="hidden-vhost",queue="secret-queue-a"} 1`)
		} else {
			require.NotContains(t, string(body), "secret-queue")
		}
	}
}

// TestCollectorMatchesHandler: b.Collector(broker.CollectorOptions{}) registered in a fresh
// prometheus.Registry gathers the series /metrics serves (less the Go
// runtime's), and CollectorWith PerObject those of /metrics/per-object,
// on a broker with queues, deliveries, acks and dead-lettering.
func TestCollectorMatchesHandler(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{Users: users})
	conn := brokertest.Dial(t, b)
	ch := amqptest.Channel(t, conn)
	ctx := context.Background()
	_, err := ch.QueueDeclare("dst", false, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("work", false, false, false, false, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dst"})
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, ch.PublishWithContext(ctx, "", "work", false, false, amqp91Body("m")))
	}
	require.NoError(t, ch.PublishWithContext(ctx, "", "nowhere", false, false, amqp91Body("lost")))
	amqptest.Idle(t, b.WaitIdle)
	d, ok, err := ch.Get("work", false)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, d.Ack(false))
	d, ok, err = ch.Get("work", false)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, d.Nack(false, false))
	amqptest.Idle(t, b.WaitIdle)

	for _, perObject := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		reg.MustRegister(b.Collector(broker.CollectorOptions{PerObject: perObject}))
		fams := promtest.Scrape(t, b.MetricsHandler(broker.MetricsOptions{PerObject: perObject}))
		require.Equal(t, float64(1), fams["rabbitmq_global_messages_dead_lettered_rejected_total"].Samples[`dead_letter_strategy="at_most_once",queue_type="rabbit_classic_queue"`])
		promtest.RequireGathers(t, reg, fams)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.Collector(broker.CollectorOptions{}))
	n, err := testutil.GatherAndCount(reg, "rabbitmq_queue_messages_ready")
	require.NoError(t, err)
	require.Equal(t, 1, n, "Collector sums the queues, as MetricsHandler")
}
