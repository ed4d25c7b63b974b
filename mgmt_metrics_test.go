package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// promFamily is one parsed metric family.
type promFamily struct {
	typ     string
	help    string
	samples map[string]float64 // canonical label set -> value
}

var (
	promMetricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	promLabelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseProm parses the Prometheus text exposition format (0.0.4) strictly:
// it rejects what a lenient scraper would let pass, so the test catches
// sloppy output. Rules checked: the body ends in a newline and has no
// blank lines; HELP and TYPE appear at most once per family and before its
// samples; types are the five the format defines; names and label names
// are valid; label values use only the three escapes; a family's samples
// are contiguous; no series repeats; values are floats (or ±Inf, NaN);
// counters are non-negative and named *_total; every sample belongs to a
// TYPEd family.
func parseProm(body string) (map[string]*promFamily, error) {
	if !strings.HasSuffix(body, "\n") {
		return nil, fmt.Errorf("the exposition does not end with a newline")
	}
	fams := map[string]*promFamily{}
	done := map[string]bool{} // families whose samples ended
	current := ""
	family := func(name string) *promFamily {
		f, ok := fams[name]
		if !ok {
			f = &promFamily{samples: map[string]float64{}}
			fams[name] = f
		}
		return f
	}
	for i, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", i+1, line, fmt.Sprintf(format, args...))
		}
		if line == "" {
			return nil, fail("blank line")
		}
		if strings.HasPrefix(line, "#") {
			parts := strings.SplitN(line, " ", 4)
			if len(parts) < 3 || (parts[1] != "HELP" && parts[1] != "TYPE") {
				continue // a plain comment
			}
			name := parts[2]
			if !promMetricName.MatchString(name) {
				return nil, fail("bad metric name")
			}
			f := family(name)
			if len(f.samples) > 0 {
				return nil, fail("%s after samples", parts[1])
			}
			if len(parts) != 4 {
				return nil, fail("%s without text", parts[1])
			}
			if parts[1] == "HELP" {
				if f.help != "" {
					return nil, fail("second HELP")
				}
				f.help = parts[3]
				continue
			}
			if f.typ != "" {
				return nil, fail("second TYPE")
			}
			switch parts[3] {
			case "counter", "gauge", "histogram", "summary", "untyped":
			default:
				return nil, fail("unknown type")
			}
			f.typ = parts[3]
			continue
		}
		name, labels, rest, err := parsePromSample(line)
		if err != nil {
			return nil, fail("%v", err)
		}
		f, ok := fams[name]
		if !ok || f.typ == "" {
			return nil, fail("sample without TYPE")
		}
		if name != current {
			if done[name] {
				return nil, fail("samples of %s are not contiguous", name)
			}
			if current != "" {
				done[current] = true
			}
			current = name
		}
		fields := strings.Fields(rest)
		if len(fields) != 1 && len(fields) != 2 {
			return nil, fail("want value [timestamp]")
		}
		v, err := parsePromValue(fields[0])
		if err != nil {
			return nil, fail("%v", err)
		}
		if len(fields) == 2 {
			if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
				return nil, fail("bad timestamp")
			}
		}
		if f.typ == "counter" && !(v >= 0) {
			return nil, fail("negative counter")
		}
		if f.typ == "counter" && !strings.HasSuffix(name, "_total") {
			return nil, fail("counter names end in _total")
		}
		if _, dup := f.samples[labels]; dup {
			return nil, fail("duplicate series")
		}
		f.samples[labels] = v
	}
	return fams, nil
}

// parsePromSample splits name{labels} and the rest, unescaping label
// values; labels come back canonical: sorted name="value" pairs.
func parsePromSample(line string) (name, labels, rest string, err error) {
	end := strings.IndexAny(line, "{ ")
	if end <= 0 {
		return "", "", "", errors.New("no value")
	}
	name, rest = line[:end], line[end:]
	if !promMetricName.MatchString(name) {
		return "", "", "", errors.New("bad metric name")
	}
	var pairs []string
	if rest[0] == '{' {
		i := 1
		seen := map[string]bool{}
		at := func(i int) (byte, error) {
			if i >= len(rest) {
				return 0, errors.New("unterminated labels")
			}
			return rest[i], nil
		}
		for {
			c, err := at(i)
			if err != nil {
				return "", "", "", err
			}
			if c == '}' {
				i++
				break
			}
			eq := strings.IndexByte(rest[i:], '=')
			if eq <= 0 {
				return "", "", "", errors.New("label without =")
			}
			ln := rest[i : i+eq]
			if !promLabelName.MatchString(ln) || seen[ln] {
				return "", "", "", fmt.Errorf("bad or repeated label name %q", ln)
			}
			seen[ln] = true
			i += eq + 1
			if c, err := at(i); err != nil || c != '"' {
				return "", "", "", errors.New("label value not quoted")
			}
			i++
			var val strings.Builder
			for {
				c, err := at(i)
				if err != nil {
					return "", "", "", err
				}
				if c == '"' {
					break
				}
				if c == '\\' {
					i++
					e, err := at(i)
					if err != nil {
						return "", "", "", err
					}
					switch e {
					case '\\':
						val.WriteByte('\\')
					case '"':
						val.WriteByte('"')
					case 'n':
						val.WriteByte('\n')
					default:
						return "", "", "", fmt.Errorf("bad escape \\%c", e)
					}
				} else {
					val.WriteByte(c)
				}
				i++
			}
			i++
			pairs = append(pairs, ln+"="+strconv.Quote(val.String()))
			if c, err := at(i); err == nil && c == ',' {
				i++
			}
		}
		rest = rest[i:]
	}
	if !strings.HasPrefix(rest, " ") {
		return "", "", "", errors.New("no space before the value")
	}
	sort.Strings(pairs)
	return name, strings.Join(pairs, ","), rest[1:], nil
}

func parsePromValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

func scrape(t *testing.T, h http.Handler) map[string]*promFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	fams, err := parseProm(string(body))
	require.NoError(t, err, "%s", body)
	return fams
}

func TestMetricsScrape(t *testing.T) {
	b := mgmtBroker(t)
	conn := mgmtDial(t, b, "guest", "m")
	ch := amqptest.Channel(t, conn)
	// A queue name that needs every escape the format has.
	odd := "odd \"q\"\\\nname"
	for _, q := range []string{"plain", odd} {
		_, err := ch.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
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
	_, err := c2.Consume("plain", "", false, false, false, false, nil)
	require.NoError(t, err)
	mgmtIdle(t, b)

	fams := scrape(t, b.MetricsHandlerWith(MetricsOptions{PerObject: true}))
	value := func(name, labels string) float64 {
		t.Helper()
		f, ok := fams[name]
		require.True(t, ok, "family %s", name)
		v, ok := f.samples[labels]
		require.True(t, ok, "%s{%s} in %v", name, labels, f.samples)
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
	require.Equal(t, "gauge", fams["rabbitmq_queue_messages_ready"].typ)
	require.Equal(t, "counter", fams["rabbitmq_global_messages_received_total"].typ)
	require.NotContains(t, fams, "warren_store_disk_bytes", "in-memory brokers have no store on disk")

	srv := httptest.NewServer(b.MetricsHandler())
	defer srv.Close()
	status, _, _ := (&mgmtHTTP{t: t, srv: srv}).do("POST", "/metrics", "", nil)
	require.Equal(t, http.StatusMethodNotAllowed, status)
}

func amqp91Body(s string) amqp091.Publishing { return amqp091.Publishing{Body: []byte(s)} }

func TestMetricsStoreSize(t *testing.T) {
	b, err := New(Options{DataDir: t.TempDir()})
	require.NoError(t, err)
	defer b.Close()
	fams := scrape(t, b.MetricsHandler())
	require.Positive(t, fams["warren_store_disk_bytes"].samples[""])
}

// TestParsePromRejects shows the parser is strict: each input breaks one
// rule.
func TestParsePromRejects(t *testing.T) {
	for name, body := range map[string]string{
		"no newline at end":  "# TYPE a gauge\na 1",
		"blank line":         "# TYPE a gauge\n\na 1\n",
		"sample before type": "a 1\n# TYPE a gauge\n",
		"two types":          "# TYPE a gauge\n# TYPE a gauge\na 1\n",
		"bad type":           "# TYPE a meter\na 1\n",
		"bad escape":         "# TYPE a gauge\na{l=\"\\t\"} 1\n",
		"duplicate series":   "# TYPE a gauge\na{l=\"x\"} 1\na{l=\"x\"} 2\n",
		"split family":       "# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\na{l=\"y\"} 2\n",
		"bad value":          "# TYPE a gauge\na one\n",
		"negative counter":   "# TYPE a_total counter\na_total -1\n",
		"counter name":       "# TYPE a counter\na 1\n",
		"bad label name":     "# TYPE a gauge\na{1l=\"x\"} 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseProm(body)
			require.Error(t, err, "accepted: %q", body)
		})
	}
	_, err := parseProm("# HELP a help \\\\ text\n# TYPE a gauge\na{l=\"q\\\"\\n\\\\\"} +Inf\n# TYPE b_total counter\nb_total 0 1700000000000\n")
	require.NoError(t, err)
}

// TestMetricsDeadLettered checks RabbitMQ 3.10's dead-lettering counters:
// one family per reason, labelled queue_type and dead_letter_strategy
// (at_most_once with a dead-letter exchange, disabled without).
func TestMetricsDeadLettered(t *testing.T) {
	b := mgmtBroker(t)
	conn := mgmtDial(t, b, "guest", "dl")
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
	mgmtIdle(t, b)
	getOne := func(q string) amqp091.Delivery {
		d, ok, err := ch.Get(q, false)
		require.NoError(t, err)
		require.True(t, ok, q)
		return d
	}
	require.NoError(t, getOne("dl.rej").Nack(false, false))
	require.NoError(t, getOne("dl.lim").Nack(false, true), "delivered once, over the limit of 0")
	require.NoError(t, getOne("plain.rej").Reject(false))
	mgmtIdle(t, b)

	fams := scrape(t, b.MetricsHandlerWith(MetricsOptions{PerObject: true}))
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
		require.Equal(t, "counter", f.typ)
		require.Equal(t, map[string]float64{labels("at_most_once"): c.dlx, labels("disabled"): c.off}, f.samples, c.reason)
	}
	require.Equal(t, float64(6), fams["rabbitmq_queue_messages_ready"].samples[`queue="dl.dst",vhost="/"`], "every at_most_once death was routed")
}

// TestMetricsDefaultNamesNothing: the default handler, meant to be open,
// sums the queue metrics and names no vhost or queue; the per-object view
// names them, and with Authenticate only administrator and monitoring
// users get it.
func TestMetricsDefaultNamesNothing(t *testing.T) {
	ctx := context.Background()
	b, err := New(Options{VHosts: []string{"/", "hidden-vhost"}, Users: []User{
		{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
		{Name: "mon", Password: "mon", Tags: []string{"monitoring"}},
		{Name: "mgr", Password: "mgr", Tags: []string{"management"}},
		{Name: "app", Password: "app"},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	conn, err := amqp091.DialConfig("amqp://guest:guest@127.0.0.1:5672/hidden-vhost", amqp091.Config{Dial: b.Dial})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch := amqptest.Channel(t, conn)
	for _, q := range []string{"secret-queue-a", "secret-queue-b"} {
		_, err := ch.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.PublishWithContext(ctx, "", q, false, false, amqp91Body("x")))
	}
	mgmtIdle(t, b)

	srv := httptest.NewServer(b.MetricsHandler())
	defer srv.Close()
	status, _, body := (&mgmtHTTP{t: t, srv: srv}).do("GET", "/metrics", "", nil)
	require.Equal(t, http.StatusOK, status)
	for _, name := range []string{"hidden-vhost", "secret-queue", "guest"} {
		require.NotContains(t, string(body), name)
	}
	fams, err := parseProm(string(body))
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"": 2}, fams["rabbitmq_queue_messages_ready"].samples, "summed over the queues")
	require.Equal(t, map[string]float64{"": 2}, fams["rabbitmq_queue_messages_published_total"].samples)

	per := httptest.NewServer(b.MetricsHandlerWith(MetricsOptions{PerObject: true, Authenticate: true}))
	defer per.Close()
	h := &mgmtHTTP{t: t, srv: per}
	for _, tc := range []struct {
		user   string
		status int
	}{{"", 401}, {"nobody", 401}, {"app", 401}, {"mgr", 401}, {"mon", 200}, {"guest", 200}} {
		status, _, body := h.do("GET", "/metrics/per-object", tc.user, nil)
		require.Equal(t, tc.status, status, "user %q: %s", tc.user, body)
		if status == 200 {
			require.Contains(t, string(body), `rabbitmq_queue_messages_ready{vhost="hidden-vhost",queue="secret-queue-a"} 1`)
		} else {
			require.NotContains(t, string(body), "secret-queue")
		}
	}
}
