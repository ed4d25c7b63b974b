package metrics_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/metrics/promtest"
)

// TestMetricsShovels: three shovels (one running with no end, one
// running with src-delete-after 5 that has moved 2, one that cannot
// reach its destination) are counted by state in
// rabbitmq_shovel_dynamic and summed in
// warren_shovel_messages_forwarded_total, naming no shovel; the
// per-object view has each link's forwarded count, whether it runs and
// what it still moves; the Collector gathers the same series.
func TestMetricsShovels(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{Users: users})
	ch := amqptest.ConfirmChannel(t, brokertest.Dial(t, b))
	for _, q := range []string{"in", "limited"} {
		amqptest.DeclareQueue(t, ch, q, true)
	}
	api := amqptest.NewAPI(t, b.ManagementHandler())
	local := "amqp://guest:guest@/"
	for name, v := range map[string]map[string]any{
		"keep":    {"src-uri": local, "src-queue": "in", "dest-uri": local, "dest-queue": "out"},
		"five":    {"src-uri": local, "src-queue": "limited", "dest-uri": local, "dest-queue": "out5", "src-delete-after": 5},
		"nowhere": {"src-uri": local, "src-queue": "in", "dest-uri": "amqp://guest:guest@127.0.0.1:1/", "dest-queue": "x", "reconnect-delay": 60},
	} {
		status, _, body := api.Do("PUT", "/api/parameters/shovel/%2F/"+name, "guest", map[string]any{"value": v})
		require.Equal(t, http.StatusCreated, status, "%s", body)
	}
	amqptest.PublishConfirmed(t, ch, "in", true, "a", "b", "c")
	amqptest.PublishConfirmed(t, ch, "limited", true, "x", "y")

	var fams map[string]*promtest.Family
	amqptest.Poll(t, func() bool {
		fams = promtest.Scrape(t, b.MetricsHandler(broker.MetricsOptions{PerObject: true}))
		f := fams["warren_shovel_messages_forwarded_total"]
		return f != nil && f.Samples[`shovel="keep",vhost="/"`] == 3 && f.Samples[`shovel="five",vhost="/"`] == 2 &&
			fams["rabbitmq_shovel_dynamic"].Samples[`status="starting"`] == 1
	}, "per-object shovel metrics never showed the moves: %v", &fams)
	require.Equal(t, map[string]float64{`status="running"`: 2, `status="starting"`: 1, `status="terminated"`: 0}, fams["rabbitmq_shovel_dynamic"].Samples)
	require.Equal(t, "gauge", fams["rabbitmq_shovel_dynamic"].Type)
	require.Equal(t, "counter", fams["warren_shovel_messages_forwarded_total"].Type)
	require.Equal(t, map[string]float64{`shovel="five",vhost="/"`: 1, `shovel="keep",vhost="/"`: 1, `shovel="nowhere",vhost="/"`: 0}, fams["warren_shovel_running"].Samples)
	require.Equal(t, map[string]float64{`shovel="five",vhost="/"`: 3}, fams["warren_shovel_messages_remaining"].Samples)

	agg := promtest.Scrape(t, b.MetricsHandler(broker.MetricsOptions{}))
	require.Equal(t, map[string]float64{"": 5}, agg["warren_shovel_messages_forwarded_total"].Samples)
	require.Equal(t, float64(2), agg["rabbitmq_shovel_dynamic"].Samples[`status="running"`])
	require.Nil(t, agg["warren_shovel_running"], "the aggregated view names no shovel")
	require.Nil(t, agg["warren_shovel_messages_remaining"])

	for _, perObject := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		reg.MustRegister(b.Collector(broker.CollectorOptions{PerObject: perObject}))
		promtest.RequireGathers(t, reg, promtest.Scrape(t, b.MetricsHandler(broker.MetricsOptions{PerObject: perObject})))
	}
}
