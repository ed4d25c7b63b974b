package mgmt_test

import (
	"net/http"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// detailsOf returns obj[name+"_details"] as a map, nil when absent.
func detailsOf(obj map[string]any, name string) map[string]any {
	d, _ := obj[name+"_details"].(map[string]any)
	return d
}

// TestRatesAndSamples: with a history, publishing shows as a publish rate
// on the overview, the vhost and the queue, and a growing queue as
// samples of its length, newest first, when the request asks for them;
// the publisher's connection shows the bytes it sends as a rate.
func TestRatesAndSamples(t *testing.T) {
	b := mgmtBrokerWith(t, broker.Options{Management: broker.ManagementOptions{StatsInterval: 20 * time.Millisecond}})
	h := amqptest.NewAPI(t, b.ManagementHandler())
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{Dial: b.Dial})
	ch := amqptest.ConfirmChannel(t, conn)
	amqptest.DeclareQueue(t, ch, "rated", true)

	done := make(chan struct{})
	publishing := make(chan struct{})
	go func() {
		defer close(publishing)
		for {
			select {
			case <-done:
				return
			default:
			}
			if ch.Publish("", "rated", false, false, amqp091.Publishing{Body: []byte("m")}) != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { close(done); <-publishing }()

	amqptest.Poll(t, func() bool {
		ov := h.Get("/api/overview").(map[string]any)
		q := h.Get("/api/queues/%2F/rated").(map[string]any)
		vh := h.Get("/api/vhosts/%2F").(map[string]any)
		rate := func(obj any, name string) float64 {
			d := detailsOf(obj.(map[string]any), name)
			if d == nil {
				return 0
			}
			return d["rate"].(float64)
		}
		conns := h.Get("/api/connections").([]any)
		return rate(ov["message_stats"], "publish") > 0 && rate(q["message_stats"], "publish") > 0 &&
			rate(q, "messages") > 0 && rate(vh, "messages") > 0 && rate(ov["queue_totals"], "messages") > 0 &&
			len(conns) == 1 && rate(conns[0], "recv_oct") > 0
	}, "publish and length rates on the overview, the vhost and the queue, bytes on the connection")

	// Samples come back once asked for: the queue is watched from then on.
	var samples []any
	amqptest.Poll(t, func() bool {
		q := h.Get("/api/queues/%2F/rated?lengths_age=60&lengths_incr=1&msg_rates_age=60&msg_rates_incr=1").(map[string]any)
		d := detailsOf(q, "messages")
		samples, _ = d["samples"].([]any)
		_, hasAvg := d["avg_rate"]
		return len(samples) >= 3 && hasAvg && detailsOf(q["message_stats"].(map[string]any), "publish")["samples"] != nil
	}, "three samples of the queue's length")
	for i := 1; i < len(samples); i++ {
		newer, older := samples[i-1].(map[string]any), samples[i].(map[string]any)
		require.Greater(t, newer["timestamp"].(float64), older["timestamp"].(float64), "newest first")
		require.GreaterOrEqual(t, newer["sample"].(float64), older["sample"].(float64), "the queue only grows")
		require.GreaterOrEqual(t, newer["timestamp"].(float64)-older["timestamp"].(float64), 500.0, "one per second, give or take half an interval")
	}
	ov := h.Get("/api/overview?msg_rates_age=60&msg_rates_incr=5").(map[string]any)
	require.NotNil(t, detailsOf(ov["message_stats"].(map[string]any), "publish")["samples"])
}

// TestRatesQueryErrors: history parameters are whole positive seconds,
// given in pairs.
func TestRatesQueryErrors(t *testing.T) {
	h := amqptest.NewAPI(t, mgmtBroker(t).ManagementHandler())
	for _, path := range []string{
		"/api/overview?msg_rates_age=60",
		"/api/overview?msg_rates_age=60&msg_rates_incr=0",
		"/api/queues?lengths_age=-1&lengths_incr=5",
		"/api/vhosts/%2F?lengths_age=1.5&lengths_incr=5",
		"/api/connections?data_rates_age=x&data_rates_incr=5",
	} {
		status, _, body := h.Do("GET", path, "guest", nil)
		require.Equal(t, http.StatusBadRequest, status, path)
		_, reason := amqptest.ErrorBody(t, body)
		require.Contains(t, reason, "must both be positive whole numbers of seconds", path)
	}
}

// TestNoRatesWhenStatsOff: a negative StatsInterval keeps no history and
// the API shows counts without details.
func TestNoRatesWhenStatsOff(t *testing.T) {
	b := mgmtBrokerWith(t, broker.Options{Management: broker.ManagementOptions{StatsInterval: -1}})
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ov := h.Get("/api/overview?msg_rates_age=60&msg_rates_incr=5").(map[string]any)
	require.Nil(t, detailsOf(ov["message_stats"].(map[string]any), "publish"))
	require.Nil(t, detailsOf(ov["queue_totals"].(map[string]any), "messages"))
	require.Contains(t, ov["queue_totals"], "messages")
}
