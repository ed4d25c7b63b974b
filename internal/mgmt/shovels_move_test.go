package mgmt_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// moveBody is what the console's "Move messages" form sends, field for
// field RabbitMQ 3.10.8's (queue.ejs and shovel.js of
// rabbitmq_shovel_management): a shovel named "Move from <queue>" that
// reads the queue through the local URI and deletes itself once it moved
// the queue's length. Warren's form names the user the move runs as in
// the local URIs (RabbitMQ's direct connection needs none).
func moveBody(vhost, queue, destURI, destQueue string) map[string]any {
	local := "amqp://guest:guest@/" + url.PathEscape(vhost)
	if destURI == "" {
		destURI = local
	}
	return map[string]any{"component": "shovel", "vhost": vhost, "name": "Move from " + queue, "value": map[string]any{
		"src-protocol": "amqp091", "src-uri": local, "src-queue": queue,
		"src-prefetch-count": 1000, "src-delete-after": "queue-length",
		"dest-protocol": "amqp091", "dest-uri": destURI, "dest-queue": destQueue,
		"dest-add-forward-headers": false, "ack-mode": "on-confirm", "src-consumer-args": map[string]any{},
	}}
}

// TestMoveMessages moves 1,000 persistent messages out of a queue, as
// the console's "Move messages" does, to another queue of the same
// broker and to a queue of another Warren over TCP: the source ends
// empty, the destination holds every message once and in order, the
// shovel deletes its own parameter and leaves /api/shovels, and every
// status /api/shovels showed on the way had forwarded + remaining equal
// to the queue's length.
func TestMoveMessages(t *testing.T) {
	const n = 1000
	for _, tc := range []struct {
		name   string
		remote bool
	}{{"local to local", false}, {"local to another Warren", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := mgmtBroker(t)
			h := amqptest.NewAPI(t, b.ManagementHandler())
			ch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, b.Dial, "guest", "test"))
			amqptest.DeclareQueue(t, ch, "dlq", true)
			bodies := amqptest.Numbered("m", n)
			amqptest.PublishConfirmed(t, ch, "dlq", true, bodies...)
			destURI, destCh := "", ch
			if tc.remote {
				other := brokertest.New(t)
				destURI = other.URL()
				destCh = amqptest.ConfirmChannel(t, brokertest.Dial(t, other))
			}

			// Watch the link's counts while it runs.
			var mu sync.Mutex
			var bad []string
			seen := 0
			stop, watched := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(watched)
				for {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
					_, _, raw := h.Do("GET", "/api/shovels/%2F", "guest", nil)
					var list []map[string]any
					if json.Unmarshal(raw, &list) != nil {
						continue
					}
					for _, l := range list {
						f, fok := l["messages_forwarded"].(float64)
						r, rok := l["messages_remaining"].(float64)
						mu.Lock()
						if fok && rok {
							seen++
							if f+r != n {
								bad = append(bad, fmt.Sprintf("forwarded %v + remaining %v", f, r))
							}
						}
						mu.Unlock()
					}
				}
			}()

			status, _, out := h.Do("PUT", "/api/parameters/shovel/%2F/"+url.PathEscape("Move from dlq"), "guest", moveBody("/", "dlq", destURI, "moved"))
			require.Equal(t, 201, status, "%s", out)
			require.Eventually(t, func() bool {
				status, _, _ := h.Do("GET", "/api/parameters/shovel/%2F/"+url.PathEscape("Move from dlq"), "guest", nil)
				return status == 404
			}, 30*time.Second, 5*time.Millisecond, "the shovel did not delete itself")
			require.Eventually(t, func() bool { return len(h.Get("/api/shovels").([]any)) == 0 }, 10*time.Second, 5*time.Millisecond)
			close(stop)
			<-watched

			amqptest.RequireEmpty(t, ch, "dlq")
			require.Equal(t, bodies, amqptest.GetAll(t, destCh, "moved"))
			mu.Lock()
			defer mu.Unlock()
			require.Empty(t, bad)
			t.Logf("%d statuses seen while moving", seen)
		})
	}
}

// TestDeleteShovel: DELETE /api/shovels/vhost/{vhost}/{name} (the
// console's Delete on the shovels page) deletes a running link's
// parameter, which stops it: 204, then the parameter and the link are
// gone; 404 for a link that does not run; a monitoring user is refused,
// as deleting the parameter refuses one. The listing's timestamp is when
// the link's state last changed.
func TestDeleteShovel(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, b.Dial, "guest", "test"))
	amqptest.DeclareQueue(t, ch, "in", true)
	keep := map[string]any{"value": map[string]any{
		"src-uri": "amqp://guest:guest@/", "src-queue": "in", "dest-uri": "amqp://guest:guest@/", "dest-queue": "out",
	}}
	runAPICases(t, h, []apiCase{{"guest", "PUT", "/api/parameters/shovel/%2F/keep", keep, 201, ""}})
	require.Eventually(t, func() bool {
		list := h.Get("/api/shovels").([]any)
		return len(list) == 1 && list[0].(map[string]any)["state"] == "running"
	}, 20*time.Second, 5*time.Millisecond)
	// timestamp is when the state last changed, as RabbitMQ's is: it
	// stays while the link keeps running.
	since := h.Get("/api/shovels").([]any)[0].(map[string]any)["timestamp"].(string)
	at, err := time.Parse("2006-01-02 15:04:05", since)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), at, time.Minute)
	time.Sleep(1100 * time.Millisecond)
	require.Equal(t, since, h.Get("/api/shovels").([]any)[0].(map[string]any)["timestamp"])
	runAPICases(t, h, []apiCase{
		{"mon", "DELETE", "/api/shovels/vhost/%2F/keep", nil, 401, ""},
		{"guest", "DELETE", "/api/shovels/vhost/%2F/nothere", nil, 404, ""},
		{"guest", "DELETE", "/api/shovels/vhost/nosuchvhost/keep", nil, 404, ""},
		{"guest", "DELETE", "/api/shovels/vhost/%2F/keep", nil, 204, ""},
		{"guest", "GET", "/api/parameters/shovel/%2F/keep", nil, 404, ""},
	})
	require.Eventually(t, func() bool { return len(h.Get("/api/shovels").([]any)) == 0 }, 20*time.Second, 5*time.Millisecond)
	// The supervisor drops a link from the list only once its worker
	// returned, so nothing moves this any more.
	amqptest.PublishConfirmed(t, ch, "in", true, "stays")
	require.Equal(t, []string{"stays"}, amqptest.GetAll(t, ch, "in"))
}
