package mgmt_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/rabbitnode"
)

// rabbitAPI calls a RabbitMQ node's management API as its guest and
// returns the status and body.
func rabbitAPI(t *testing.T, node *rabbitnode.Node, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, node.MgmtURL()+path, rd)
	require.NoError(t, err)
	req.SetBasicAuth(rabbitnode.User, rabbitnode.Password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// tally counts what the service's consumers processed, wherever they
// ran, and how many of those each consumer processed.
type tally struct {
	mu   sync.Mutex
	seen map[string]int
	by   map[string]int
}

func (c *tally) add(who, body string) {
	c.mu.Lock()
	c.seen[body]++
	c.by[who]++
	c.mu.Unlock()
}

func (c *tally) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// consumer is one instance of the service's consumer: it processes
// (tallies, then acks) each message of queue, taking work per message,
// until stopped, and stops cleanly: the message in hand is finished, the
// rest of its prefetch goes back to the queue unprocessed.
type consumer struct {
	ch   *amqp091.Channel
	stop chan struct{}
	done chan struct{}
}

func startConsumer(t *testing.T, name string, conn *amqp091.Connection, queue string, work time.Duration, got *tally) *consumer {
	t.Helper()
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.Qos(10, 0, false))
	deliveries, err := ch.Consume(queue, "orders-service", false, false, false, false, nil)
	require.NoError(t, err)
	c := &consumer{ch: ch, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stop:
				return
			case d, ok := <-deliveries:
				if !ok {
					return
				}
				time.Sleep(work)
				got.add(name, string(d.Body))
				if d.Ack(false) != nil {
					return
				}
			}
		}
	}()
	return c
}

// Stop ends the consumer as a service being shut down does.
func (c *consumer) Stop(t *testing.T) {
	t.Helper()
	close(c.stop)
	<-c.done
	require.NoError(t, c.ch.Cancel("orders-service", false))
	require.NoError(t, c.ch.Close())
}

// service is the orders service of docs/migration.md as it runs on a
// real RabbitMQ 3.10.8 node: exchange orders (topic) bound to the durable
// queue orders.process with order.#, its user orders-app, the policy
// orders-limit, in vhost shop; a backlog of 300 messages and a consumer
// slower than its producers; and the Warren (with its API) it moves to.
// Every test of the guide starts from it.
type service struct {
	node          *rabbitnode.Node
	rabbitConn    *amqp091.Connection
	got           *tally
	backlog       []string
	during, after []string // published to RabbitMQ during the move, to Warren after it
	old           *consumer
	warren        *broker.Broker
	api           *amqptest.API
}

// startService skips the test in -short mode (it boots a RabbitMQ node).
func startService(t *testing.T) *service {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a RabbitMQ node")
	}
	node := rabbitnode.Start(t, rabbitnode.Options{})
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"PUT", "/api/vhosts/shop", map[string]any{}},
		{"PUT", "/api/users/orders-app", map[string]any{"password": "orders-pw", "tags": ""}},
		{"PUT", "/api/permissions/shop/orders-app", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}},
		{"PUT", "/api/exchanges/shop/orders", map[string]any{"type": "topic", "durable": true}},
		{"PUT", "/api/queues/shop/orders.process", map[string]any{"durable": true}},
		{"POST", "/api/bindings/shop/e/orders/q/orders.process", map[string]any{"routing_key": "order.#"}},
		{"PUT", "/api/policies/shop/orders-limit", map[string]any{"pattern": `^orders\.`, "apply-to": "queues", "definition": map[string]any{"max-length": 100000}}},
	} {
		status, body := rabbitAPI(t, node, c.method, c.path, c.body)
		require.Contains(t, []int{201, 204}, status, "%s %s: %s", c.method, c.path, body)
	}
	s := &service{node: node, got: &tally{seen: map[string]int{}, by: map[string]int{}}, backlog: amqptest.Numbered("backlog", 300),
		during: amqptest.Numbered("during", 200), after: amqptest.Numbered("after", 200), warren: mgmtBroker(t)}
	s.api = amqptest.NewAPI(t, s.warren.ManagementHandler())
	var err error
	s.rabbitConn, err = amqp091.Dial(s.rabbitAt())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.rabbitConn.Close() })
	s.publish(t, s.rabbitConn, s.backlog)
	// The service is slower than its producers (hence the backlog).
	s.old = startConsumer(t, "on RabbitMQ", s.rabbitConn, "orders.process", 5*time.Millisecond, s.got)
	return s
}

// rabbitAt is the service's URI on RabbitMQ.
func (s *service) rabbitAt() string {
	return fmt.Sprintf("amqp://orders-app:orders-pw@%s/shop", net.JoinHostPort(s.node.Host, strconv.Itoa(s.node.AMQPPort)))
}

// publish is the service's producer: persistent messages to orders with
// publisher confirms.
func (s *service) publish(t *testing.T, conn *amqp091.Connection, bodies []string) {
	t.Helper()
	ch := amqptest.ConfirmChannel(t, conn)
	defer ch.Close()
	for _, b := range bodies {
		amqptest.PublishMsg(t, ch, "orders", "order.created", amqp091.Publishing{Body: []byte(b), DeliveryMode: amqp091.Persistent})
	}
}

// importSteps are the guide's steps 1 and 2, export from RabbitMQ and
// import into Warren; warrenConn is then the service's connection to
// Warren (a connection of top, the whole test).
func (s *service) importSteps(top *testing.T, b *broker.Broker, warren *amqptest.API, warrenConn **amqp091.Connection) []step {
	var defs []byte
	return []step{
		{"export definitions from RabbitMQ", func(t *testing.T) {
			status, body := rabbitAPI(t, s.node, "GET", "/api/definitions", nil)
			require.Equal(t, 200, status, "%s", body)
			defs = body
			for _, want := range []string{`"orders.process"`, `"orders-app"`, `"orders-limit"`, `"order.#"`} {
				require.Contains(t, string(defs), want)
			}
		}},
		{"import definitions into Warren", func(t *testing.T) {
			status, _, body := warren.Do("POST", "/api/definitions", "guest", string(defs))
			require.Equal(t, 204, status, "%s", body)
			q := warren.Get("/api/queues/shop/orders.process").(map[string]any)
			require.Equal(t, true, q["durable"])
			require.Equal(t, "orders-limit", q["policy"])
			require.Equal(t, "topic", warren.Get("/api/exchanges/shop/orders").(map[string]any)["type"])
			// The service's user, with its RabbitMQ password (the export
			// holds its hash), may use the vhost.
			*warrenConn = amqptest.Dial(top, "amqp://orders-app:orders-pw@127.0.0.1/shop", amqp091.Config{Dial: b.Dial})
			amqptest.RequireWorks(t, *warrenConn)
		}},
	}
}

// step is one step of the guide, run as a subtest named after it.
type step struct {
	name string
	run  func(t *testing.T)
}

// runSteps runs the steps in order, stopping at the first that fails.
func runSteps(t *testing.T, steps []step) {
	t.Helper()
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			t.FailNow()
		}
	}
}

// moveProducers is the guide's step 5, the same for every variant: the
// producers publish to Warren (over *warrenConn, opened by step 2), and
// the consumers there process everything published so far.
func (s *service) moveProducers(warrenConn **amqp091.Connection) step {
	return step{"move producers", func(t *testing.T) {
		s.publish(t, *warrenConn, s.after)
		amqptest.Poll(t, func() bool { return s.got.len() == len(s.backlog)+len(s.during)+len(s.after) }, "consumers processed %d", s.got.len())
	}}
}

// requireOnce checks that every message published was processed exactly
// once, some on each broker.
func (s *service) requireOnce(t *testing.T, published []string, minOnWarren int) {
	t.Helper()
	got := s.got
	got.mu.Lock()
	defer got.mu.Unlock()
	for _, body := range published {
		require.Equal(t, 1, got.seen[body], "%s processed %d times", body, got.seen[body])
	}
	require.Len(t, got.seen, len(published))
	t.Logf("processed on RabbitMQ %d, on Warren %d", got.by["on RabbitMQ"], got.by["on Warren"])
	require.Positive(t, got.by["on RabbitMQ"], "the old consumer processed nothing")
	require.Greater(t, got.by["on Warren"], minOnWarren, "nothing moved to Warren")
}

// drained waits for rabbitmqctl to report RabbitMQ's queue empty, ready
// and unacknowledged both (the management API's counts lag).
func (s *service) drained(t *testing.T) {
	t.Helper()
	amqptest.Poll(t, func() bool {
		out := s.node.Ctl(t, "list_queues", "-p", "shop", "name", "messages", "--no-table-headers", "--quiet")
		return strings.TrimSpace(out) == "orders.process\t0"
	}, "RabbitMQ's queue is not empty")
}

// TestMigrationGuide runs docs/migration.md against a real RabbitMQ
// 3.10.8 node, one subtest per step of the guide: a service (exchange
// orders, queue orders.process, its user and policy, in vhost shop) with
// a backlog on RabbitMQ and a consumer running there moves to Warren
// while its producers keep publishing. Every message published, before,
// during and after the move, is processed exactly once, by the old
// consumer or the new one; RabbitMQ's queue ends empty.
func TestMigrationGuide(t *testing.T) {
	s := startService(t)
	during, after, b, warren := s.during, s.after, s.warren, s.api
	var warrenConn *amqp091.Connection
	var newConsumer *consumer
	// Connections and consumers outlive the step that starts them: they
	// belong to the whole test (top), not to the step's subtest.
	top := t
	runSteps(t, append(s.importSteps(top, b, warren, &warrenConn), []step{
		{"shovel RabbitMQ's queue into Warren", func(t *testing.T) {
			status, _, body := warren.Do("PUT", "/api/parameters/shovel/shop/orders-from-rabbitmq", "guest", map[string]any{"value": map[string]any{
				"src-uri": s.rabbitAt(), "src-queue": "orders.process",
				"dest-uri": "amqp://orders-app:orders-pw@/shop", "dest-queue": "orders.process",
				"ack-mode": "on-confirm", "src-prefetch-count": 100,
			}})
			require.Equal(t, 201, status, "%s", body)
			require.Eventually(t, func() bool {
				list, _ := warren.Get("/api/shovels/shop").([]any)
				return len(list) == 1 && list[0].(map[string]any)["state"] == "running"
			}, 30*time.Second, 20*time.Millisecond)
			// Producers still publish to RabbitMQ: that reaches Warren too.
			s.publish(t, s.rabbitConn, during)
		}},
		{"move consumers", func(t *testing.T) {
			s.old.Stop(t)
			newConsumer = startConsumer(top, "on Warren", warrenConn, "orders.process", 0, s.got)
			amqptest.Poll(t, func() bool { return s.got.len() >= len(s.backlog)+len(during) }, "the new consumer got %d", s.got.len())
		}},
		s.moveProducers(&warrenConn),
		{"drain RabbitMQ and remove the shovel", func(t *testing.T) {
			s.drained(t)
			status, _, body := warren.Do("DELETE", "/api/shovels/vhost/shop/orders-from-rabbitmq", "guest", nil)
			require.Equal(t, 204, status, "%s", body)
			require.Eventually(t, func() bool { return len(warren.Get("/api/shovels").([]any)) == 0 }, 20*time.Second, 20*time.Millisecond)
			newConsumer.Stop(t)
		}},
	}...))
	s.requireOnce(t, append(append(append([]string{}, s.backlog...), during...), after...), len(after))
}
