package shovel_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/rabbitnode"
	"github.com/warrenmq/broker/internal/warrenproc"
)

// TestShovelThroughput measures how fast a shovel moves persistent 1 KiB
// messages, on-confirm, prefetch 1000 (the default), with the source
// filled beforehand: Warren to Warren (the shovel in the destination's
// process, the source another Warren process), RabbitMQ to Warren (the
// shovel in Warren), and RabbitMQ's own shovel plugin doing the same move
// from one RabbitMQ node's queue over AMQP into the node itself. The
// three alternate for a number of rounds and the medians are logged. It
// runs only with WARREN_SHOVEL_THROUGHPUT=1 (a few minutes);
// WARREN_SHOVEL_THROUGHPUT_N sets the message count (default 10000) and
// WARREN_SHOVEL_THROUGHPUT_ROUNDS the rounds (default 3).
// scripts/shovel-bench.sh runs it.
func TestShovelThroughput(t *testing.T) {
	if os.Getenv("WARREN_SHOVEL_THROUGHPUT") != "1" {
		t.Skip("set WARREN_SHOVEL_THROUGHPUT=1 to measure")
	}
	n := 10000
	if s := os.Getenv("WARREN_SHOVEL_THROUGHPUT_N"); s != "" {
		_, err := fmt.Sscan(s, &n)
		require.NoError(t, err)
	}
	rounds := 3
	if s := os.Getenv("WARREN_SHOVEL_THROUGHPUT_ROUNDS"); s != "" {
		_, err := fmt.Sscan(s, &rounds)
		require.NoError(t, err)
		require.Positive(t, rounds)
	}
	node := rabbitnode.Start(t, rabbitnode.Options{Plugins: []string{"rabbitmq_shovel", "rabbitmq_shovel_management"}})
	bin := warrenproc.Build(t)
	start := func() *warrenproc.Process {
		dir := filepath.Join(t.TempDir(), "data")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return warrenproc.Start(t, bin, dir, "-http", "127.0.0.1:0")
	}
	src, dst := start(), start()
	body := strings.Repeat("x", 1024)

	type setup struct {
		name           string
		srcURL, dstURL string // where the queues are
		mgmt           string // where the shovel is declared
		shovelSrc      string // its src-uri
	}
	setups := []setup{
		{"Warren to Warren", src.URL(), dst.URL(), "http://" + dst.HTTPAddr, src.URL()},
		{"RabbitMQ to Warren", node.URL(), dst.URL(), "http://" + dst.HTTPAddr, node.URL()},
		// RabbitMQ's shovel reads "amqp://host/" as the vhost "" (its URI
		// spec), so its src-uri has no path: the default vhost.
		{"RabbitMQ's shovel, RabbitMQ to RabbitMQ", node.URL(), node.URL(), node.MgmtURL(), strings.TrimSuffix(node.URL(), "/")},
	}
	rates := map[string][]float64{}
	for round := range rounds {
		for i, s := range setups {
			in, out := fmt.Sprintf("tp-in-%d-%d", round, i), fmt.Sprintf("tp-out-%d-%d", round, i)
			func() {
				conn := amqptest.Dial(t, s.srcURL, amqp091.Config{})
				defer conn.Close()
				ch := amqptest.ConfirmChannel(t, conn)
				amqptest.DeclareQueue(t, ch, in, true)
				require.NoError(t, ch.Confirm(false))
				confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
				for range n {
					amqptest.PublishMsg(t, ch, "", in, amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent})
				}
				for range n {
					c, _ := amqptest.Receive(t, confirms)
					require.True(t, c.Ack)
				}
			}()
			name := "tp-" + in
			began := time.Now()
			putParameter(t, s.mgmt, "shovel", "/", name, map[string]any{
				"src-uri": s.shovelSrc, "src-queue": in, "dest-uri": "amqp://", "dest-queue": out,
				"ack-mode": "on-confirm",
			})
			for {
				d, err := queueDepth(s.dstURL, out)
				if err == nil && d >= n {
					break
				}
				require.Less(t, time.Since(began), 2*time.Minute, "%s: %d of %d moved", s.name, d, n)
				time.Sleep(10 * time.Millisecond)
			}
			rate := float64(n) / time.Since(began).Seconds()
			rates[s.name] = append(rates[s.name], rate)
			t.Logf("round %d, %s: %.0f msg/s", round+1, s.name, rate)
			status, b := mgmtDo(t, http.MethodDelete, s.mgmt+"/api/parameters/shovel/%2F/"+name, nil)
			require.Contains(t, []int{http.StatusNoContent, http.StatusOK}, status, "%s", b)
		}
	}
	for _, s := range setups {
		r := rates[s.name]
		sort.Float64s(r)
		t.Logf("median, %s: %.0f msg/s (rounds %v)", s.name, r[len(r)/2], fmtRates(r))
	}
}

func fmtRates(r []float64) string {
	var parts []string
	for _, x := range r {
		parts = append(parts, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(parts, ", ")
}
