package shovel_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/rabbitnode"
	"github.com/warrenmq/broker/internal/warrenproc"
)

// TestShovelDrainsRabbitMQKillingBothEnds runs a shovel inside a Warren
// server process that drains a RabbitMQ queue of 10,000 persistent
// messages into Warren, on-confirm, and midway kills Warren with SIGKILL
// (restarted on the same data: the stored shovel starts again) and then
// the RabbitMQ node (SIGKILL, restarted on the same data and port).
// Every message arrives. Duplicates: the Warren crash redelivers at most
// the prefetch window it left unacknowledged. What the RabbitMQ crash
// redelivers depends on its queue type: a quorum queue commits each
// settlement to its raft log before applying it, so it too redelivers at
// most the window; a classic queue (3.10's queue index) buffers acks of
// persistent messages in memory until its journal fills or syncs, so
// SIGKILL forgets acks it had accepted and redelivers what it had already
// handed over, bounded only by what moved before the kill.
func TestShovelDrainsRabbitMQKillingBothEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a RabbitMQ node and a Warren process")
	}
	for _, queueType := range []string{"quorum", "classic"} {
		t.Run(queueType, func(t *testing.T) { drainKillingBothEnds(t, queueType) })
	}
}

func drainKillingBothEnds(t *testing.T, queueType string) {
	const n, prefetch = 10000, 100
	node := rabbitnode.Start(t, rabbitnode.Options{})
	func() {
		conn := amqptest.Dial(t, node.URL(), amqp091.Config{})
		defer conn.Close()
		ch := amqptest.ConfirmChannel(t, conn)
		_, err := ch.QueueDeclare("in", true, false, false, false, amqp091.Table{"x-queue-type": queueType})
		require.NoError(t, err)
		amqptest.PublishConfirmed(t, ch, "in", true, amqptest.Numbered("m", n)...)
	}()

	bin := warrenproc.Build(t)
	data := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(data, 0o755))
	warren := warrenproc.Start(t, bin, data, "-http", "127.0.0.1:0")
	putParameter(t, "http://"+warren.HTTPAddr, "shovel", "/", "drain", map[string]any{
		"src-uri": node.URL(), "src-queue": "in", "dest-uri": "amqp://", "dest-queue": "out",
		"ack-mode": "on-confirm", "src-prefetch-count": prefetch, "reconnect-delay": 0.2,
	})

	deadline := time.Now().Add(3 * time.Minute)
	waitDepth := func(what, uri, queue string, done func(int) bool) {
		t.Helper()
		for {
			d, err := queueDepth(uri, queue)
			if err == nil && done(d) {
				return
			}
			require.True(t, time.Now().Before(deadline), "%s: %s %q at %d (%v)", what, uri, queue, d, err)
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitDepth("before killing Warren", warren.URL(), "out", func(d int) bool { return d >= n/4 })
	warren.Kill(t)
	warren = warrenproc.Start(t, bin, data, "-http", "127.0.0.1:0")
	waitDepth("before killing RabbitMQ", warren.URL(), "out", func(d int) bool { return d >= n/2 })
	node.Kill(t)
	left, _ := queueDepth(warren.URL(), "out")
	node.Restart(t)
	t.Logf("killed RabbitMQ with %d of %d in Warren", left, n)
	require.Less(t, left, n, "the drain was over before RabbitMQ was killed")
	waitDepth("draining RabbitMQ", node.URL(), "in", func(d int) bool { return d == 0 })

	// Read Warren's queue until every id has arrived and nothing more
	// comes, then count the duplicates.
	conn := amqptest.Dial(t, warren.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.Qos(1000, 0, false))
	deliveries, err := ch.Consume("out", "", false, false, false, false, nil)
	require.NoError(t, err)
	seen := map[string]int{}
	quiet := 2 * time.Second
	for idle := time.NewTimer(time.Minute); ; {
		select {
		case m := <-deliveries:
			seen[string(m.Body)]++
			require.NoError(t, m.Ack(false))
			idle.Reset(quiet)
			continue
		case <-idle.C:
		}
		if len(seen) == n {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d arrived", len(seen), n)
		idle.Reset(quiet)
	}
	dups := 0
	for _, c := range seen {
		require.LessOrEqual(t, c, 3, "a message arrived more often than two crashes explain")
		dups += c - 1
	}
	for _, id := range amqptest.Numbered("m", n) {
		require.Contains(t, seen, id)
	}
	t.Logf("%s queue: %d messages, %d duplicates", queueType, n, dups)
	if queueType == "quorum" {
		require.LessOrEqual(t, dups, 2*prefetch, "each crash redelivers at most one prefetch window")
	} else {
		require.LessOrEqual(t, dups, prefetch+left, "the Warren crash redelivers a window; the RabbitMQ crash at most what had moved")
	}
}

// putParameter stores a runtime parameter over a management API (Warren's
// or RabbitMQ's: both take guest/guest here) and requires 201 or 204.
func putParameter(t *testing.T, base, component, vhost, name string, value any) {
	t.Helper()
	path := fmt.Sprintf("/api/parameters/%s/%s/%s", component, url.PathEscape(vhost), url.PathEscape(name))
	status, body := mgmtDo(t, http.MethodPut, base+path, map[string]any{"value": value})
	require.Contains(t, []int{http.StatusCreated, http.StatusNoContent}, status, "PUT %s: %s", path, body)
}

// mgmtDo sends one management API request as guest.
func mgmtDo(t *testing.T, method, rawURL string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	require.NoError(t, err)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// queueDepth is a queue's ready count as queue.declare passive reports
// it, over a connection of its own (either end may have just restarted).
func queueDepth(uri, queue string) (int, error) {
	conn, err := amqp091.DialConfig(uri, amqp091.Config{Dial: amqp091.DefaultDial(2 * time.Second)})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	return q.Messages, err
}
