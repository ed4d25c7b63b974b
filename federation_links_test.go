package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	broker "github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// newFederated returns a broker named name (the cluster_name global
// parameter, which federation's loop checks and queue names use).
func newFederated(t *testing.T, name string) *broker.Broker {
	t.Helper()
	b := brokertest.New(t)
	_, err := b.Admin().PutGlobalParameter(context.Background(), broker.GlobalParameter{Name: "cluster_name", Value: json.RawMessage(`"` + name + `"`)})
	require.NoError(t, err)
	return b
}

// putUpstream stores the federation-upstream name on b.
func putUpstream(t *testing.T, b *broker.Broker, name string, v map[string]any) {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	_, err = b.Admin().PutParameter(context.Background(), broker.Parameter{VHost: "/", Component: "federation-upstream", Name: name, Value: raw})
	require.NoError(t, err)
}

// putFederationPolicy federates the objects of kind applyTo matching
// pattern from upstream.
func putFederationPolicy(t *testing.T, b *broker.Broker, name, pattern, applyTo, upstream string) {
	t.Helper()
	require.NoError(t, b.Admin().PutPolicy(context.Background(), broker.Policy{VHost: "/", Name: name, Pattern: pattern, ApplyTo: applyTo,
		Definition: map[string]any{"federation-upstream": upstream}}))
}

// federationLinks is GET /api/federation-links on b.
func federationLinks(api *amqptest.API) []map[string]any {
	var out []map[string]any
	for _, l := range api.Get("/api/federation-links").([]any) {
		out = append(out, l.(map[string]any))
	}
	return out
}

// waitLink waits until b has one link and it is in state, and returns it.
func waitLink(t *testing.T, api *amqptest.API, state string) map[string]any {
	t.Helper()
	var last []map[string]any
	require.Eventually(t, func() bool {
		last = federationLinks(api)
		return len(last) == 1 && last[0]["status"] == state
	}, 20*time.Second, 50*time.Millisecond, "links never reached %s", state)
	t.Logf("links: %v", last)
	return last[0]
}

// sourceBindings lists the routing keys of the bindings whose source is
// exchange x on b.
func sourceBindings(api *amqptest.API, x string) map[string]bool {
	keys := map[string]bool{}
	for _, bd := range api.Get("/api/bindings/%2F").([]any) {
		if b := bd.(map[string]any); b["source"] == x {
			keys[b["routing_key"].(string)] = true
		}
	}
	return keys
}

// TestFederatedExchangeWarrenToWarren federates a topic exchange of one
// broker from another's: the upstream gets the federation queue and an
// internal exchange bound as the local exchange is, bindings follow
// local changes, messages arrive with x-received-from, and removing the
// policy stops the link and deletes what it declared upstream.
func TestFederatedExchangeWarrenToWarren(t *testing.T) {
	up, down := newFederated(t, "up"), newFederated(t, "down")
	upAPI, downAPI := amqptest.NewAPI(t, up.ManagementHandler()), amqptest.NewAPI(t, down.ManagementHandler())
	putUpstream(t, down, "up", map[string]any{"uri": up.URL(), "reconnect-delay": 1, "expires": 60000, "message-ttl": 30000})
	putFederationPolicy(t, down, "fed", `^fed\.`, "exchanges", "up")

	dch := amqptest.Channel(t, brokertest.Dial(t, down))
	require.NoError(t, dch.ExchangeDeclare("fed.x", "topic", true, false, false, false, nil))
	amqptest.DeclareQueue(t, dch, "q", false)
	require.NoError(t, dch.QueueBind("q", "a.*", "fed.x", false, nil))

	l := waitLink(t, downAPI, "running")
	require.Equal(t, "exchange", l["type"])
	require.Equal(t, "fed.x", l["exchange"])
	require.Equal(t, "fed.x", l["upstream_exchange"])
	require.Equal(t, "up", l["upstream"])
	require.Equal(t, "Federation link (upstream: up, policy: fed)", l["local_connection"])
	require.NotContains(t, l["uri"], "guest:guest")

	// The upstream's side, as RabbitMQ 3.10 declares it.
	uconn := brokertest.Dial(t, up)
	qname := "federation: fed.x -> down"
	require.Eventually(t, func() bool { return sourceBindings(upAPI, "fed.x")["a.*"] }, 10*time.Second, 20*time.Millisecond)
	require.True(t, amqptest.QueueExists(t, uconn, qname))
	qinfo := upAPI.Get("/api/queues/%2F/" + url.PathEscape(qname)).(map[string]any)
	require.Equal(t, true, qinfo["durable"])
	args := qinfo["arguments"].(map[string]any)
	require.EqualValues(t, 60000, args["x-expires"])
	require.EqualValues(t, 30000, args["x-message-ttl"])
	require.Equal(t, "federation", args["x-internal-purpose"])

	uch := amqptest.ConfirmChannel(t, uconn)
	for i := range 10 {
		amqptest.Publish(t, uch, "fed.x", "a.b", fmt.Sprint("m", i))
	}
	amqptest.Publish(t, uch, "fed.x", "z.z", "unbound")
	got := make([]amqp091.Delivery, 0, 10)
	require.Eventually(t, func() bool {
		if m, ok, _ := dch.Get("q", true); ok {
			got = append(got, m)
		}
		return len(got) == 10
	}, 10*time.Second, 5*time.Millisecond)
	for i, m := range got {
		require.Equal(t, fmt.Sprint("m", i), string(m.Body))
		require.Equal(t, "a.b", m.RoutingKey)
		rf := m.Headers["x-received-from"].([]any)
		require.Len(t, rf, 1)
		h := rf[0].(amqp091.Table)
		require.Equal(t, "fed.x", h["exchange"])
		require.Equal(t, "/", h["vhost"])
		require.Equal(t, false, h["redelivered"])
		require.NotContains(t, h["uri"], "guest")
	}
	amqptest.RequireEmpty(t, dch, "q")

	// A new local binding reaches the upstream; a removed one leaves it.
	amqptest.DeclareQueue(t, dch, "q2", false)
	require.NoError(t, dch.QueueBind("q2", "z.*", "fed.x", false, nil))
	require.NoError(t, dch.QueueUnbind("q", "a.*", "fed.x", nil))
	require.Eventually(t, func() bool {
		b := sourceBindings(upAPI, "fed.x")
		return b["z.*"] && !b["a.*"]
	}, 10*time.Second, 20*time.Millisecond)
	amqptest.Publish(t, uch, "fed.x", "z.y", "now bound")
	require.Eventually(t, func() bool {
		m, ok, _ := dch.Get("q2", true)
		return ok && string(m.Body) == "now bound"
	}, 10*time.Second, 5*time.Millisecond)
	require.EqualValues(t, 11, waitLink(t, downAPI, "running")["messages_forwarded"])
	_, _, prom := amqptest.NewAPI(t, down.MetricsHandler(broker.MetricsOptions{})).Do("GET", "/metrics", "guest", nil)
	require.Contains(t, string(prom), `warren_federation_messages_forwarded_total{vhost="/",link="exchange:fed.x:up"} 11`)
	require.Contains(t, string(prom), `warren_federation_links{state="running"} 1`)

	// The policy goes: no link, and the upstream queue is deleted
	// (resource-cleanup-mode default).
	require.NoError(t, down.Admin().DeletePolicy(context.Background(), "/", "fed"))
	require.Eventually(t, func() bool { return len(federationLinks(downAPI)) == 0 }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return !amqptest.QueueExists(t, uconn, qname) }, 10*time.Second, 20*time.Millisecond)
}

// TestFederatedExchangeMaxHops: two brokers federating each other's
// exchange with max-hops 1 pass a message once and never back (the
// x-received-from loop check), in both directions.
func TestFederatedExchangeMaxHops(t *testing.T) {
	a, b := newFederated(t, "a"), newFederated(t, "b")
	for _, p := range []struct{ down, up *broker.Broker }{{a, b}, {b, a}} {
		putUpstream(t, p.down, "peer", map[string]any{"uri": p.up.URL(), "reconnect-delay": 1})
		putFederationPolicy(t, p.down, "fed", `^x$`, "exchanges", "peer")
	}
	ach, bch := amqptest.ConfirmChannel(t, brokertest.Dial(t, a)), amqptest.ConfirmChannel(t, brokertest.Dial(t, b))
	for _, ch := range []*amqp091.Channel{ach, bch} {
		require.NoError(t, ch.ExchangeDeclare("x", "fanout", true, false, false, false, nil))
		amqptest.DeclareQueue(t, ch, "q", false)
		require.NoError(t, ch.QueueBind("q", "", "x", false, nil))
	}
	for _, br := range []*broker.Broker{a, b} {
		waitLink(t, amqptest.NewAPI(t, br.ManagementHandler()), "running")
	}
	// Each side's upstream binding exists once the other's queue has a
	// binding from x beyond the local queue.
	for _, br := range []*broker.Broker{a, b} {
		api := amqptest.NewAPI(t, br.ManagementHandler())
		require.Eventually(t, func() bool {
			n := 0
			for _, bd := range api.Get("/api/bindings/%2F").([]any) {
				if bd.(map[string]any)["source"] == "x" {
					n++
				}
			}
			return n == 2
		}, 10*time.Second, 20*time.Millisecond)
	}
	amqptest.Publish(t, ach, "x", "", "from a")
	require.Eventually(t, func() bool {
		m, ok, _ := bch.Get("q", true)
		return ok && string(m.Body) == "from a"
	}, 10*time.Second, 5*time.Millisecond)
	m := amqptest.Get(t, ach, "q", true)
	require.Equal(t, "from a", string(m.Body))
	time.Sleep(500 * time.Millisecond) // a loop would have brought it back by now
	amqptest.RequireEmpty(t, ach, "q")
	amqptest.RequireEmpty(t, bch, "q")
}

// TestFederatedQueueWarrenToWarren: a federated queue takes messages
// from its upstream only while it has consumers and nothing ready.
func TestFederatedQueueWarrenToWarren(t *testing.T) {
	up, down := newFederated(t, "up"), newFederated(t, "down")
	downAPI := amqptest.NewAPI(t, down.ManagementHandler())
	uch := amqptest.ConfirmChannel(t, brokertest.Dial(t, up))
	amqptest.DeclareQueue(t, uch, "fq", true)
	amqptest.PublishConfirmed(t, uch, "fq", true, amqptest.Numbered("m", 20)...)

	putUpstream(t, down, "up", map[string]any{"uri": up.URL(), "reconnect-delay": 1, "prefetch-count": 5})
	putFederationPolicy(t, down, "fedq", `^fq$`, "queues", "up")
	dconn := brokertest.Dial(t, down)
	dch := amqptest.Channel(t, dconn)
	amqptest.DeclareQueue(t, dch, "fq", true)
	l := waitLink(t, downAPI, "running")
	require.Equal(t, "queue", l["type"])
	require.Equal(t, "fq", l["queue"])
	require.Equal(t, "fq", l["upstream_queue"])
	require.Equal(t, "federation-link-up", l["consumer_tag"])

	// No local consumer: nothing moves.
	time.Sleep(time.Second)
	q, err := uch.QueueDeclarePassive("fq", true, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 20, q.Messages)

	// A consumer: everything moves, in order, marked as moved once.
	cch := amqptest.Channel(t, dconn)
	require.NoError(t, cch.Qos(2, 0, false))
	ds, err := cch.Consume("fq", "c", false, false, false, false, nil)
	require.NoError(t, err)
	for i := range 20 {
		select {
		case m := <-ds:
			require.Equal(t, amqptest.Numbered("m", 20)[i], string(m.Body))
			rf := m.Headers["x-received-from"].([]any)[0].(amqp091.Table)
			require.Equal(t, "fq", rf["queue"])
			require.EqualValues(t, 1, rf["visit-count"])
			require.Equal(t, "fq", m.Headers["x-original-routing-key"])
			require.NoError(t, m.Ack(false))
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d did not arrive", i)
		}
	}
	// The consumer leaves: the link pauses and new messages stay upstream.
	require.NoError(t, cch.Cancel("c", false))
	time.Sleep(time.Second)
	amqptest.PublishConfirmed(t, uch, "fq", true, amqptest.Numbered("late", 3)...)
	time.Sleep(time.Second)
	q, err = uch.QueueDeclarePassive("fq", true, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 3, q.Messages)
	require.EqualValues(t, 20, waitLink(t, downAPI, "running")["messages_forwarded"])
}

// TestFederationBadInputs: an unreachable upstream is a link in error
// with the reason, and a policy naming no stored upstream runs no link;
// neither stops the broker, and fixing the upstream starts the link.
func TestFederationBadInputs(t *testing.T) {
	up, down := newFederated(t, "up"), newFederated(t, "down")
	api := amqptest.NewAPI(t, down.ManagementHandler())
	putFederationPolicy(t, down, "fed", `^x$`, "exchanges", "nobody")
	ch := amqptest.Channel(t, brokertest.Dial(t, down))
	require.NoError(t, ch.ExchangeDeclare("x", "direct", true, false, false, false, nil))
	time.Sleep(1500 * time.Millisecond)
	require.Empty(t, federationLinks(api))

	putUpstream(t, down, "nobody", map[string]any{"uri": "amqp://guest:secret@127.0.0.1:1", "reconnect-delay": 0.1})
	l := waitLink(t, api, "error")
	require.Contains(t, l["error"], "127.0.0.1:1")
	require.NotContains(t, l["error"], "secret")
	require.NotContains(t, l["uri"], "secret")
	down2 := federationLinksDown(api)
	require.Len(t, down2, 1)

	putUpstream(t, down, "nobody", map[string]any{"uri": up.URL(), "reconnect-delay": 0.1})
	waitLink(t, api, "running")
	require.Empty(t, federationLinksDown(api))
}

func federationLinksDown(api *amqptest.API) []any {
	return api.Get("/api/federation-links/%2F/state/down").([]any)
}

// TestFederationDefinitionsRun imports the definitions RabbitMQ 3.10.8
// exported with a federation upstream and a policy federating ^fed\.
// exchanges from every upstream (federation-upstream-set "all"), its
// upstream URI pointed at a second broker, and the federation runs.
func TestFederationDefinitionsRun(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("internal", "mgmt", "testdata", "mgmt", "rabbitmq-3.10.8", "definitions-shovel-federation.json"))
	require.NoError(t, err)
	up, down := newFederated(t, "origin"), newFederated(t, "down")
	const exported = "amqp://guest:guest@127.0.0.1:5672"
	require.Contains(t, string(raw), exported)
	raw = []byte(strings.ReplaceAll(string(raw), exported, strings.TrimSuffix(up.URL(), "/")))
	api := amqptest.NewAPI(t, down.ManagementHandler())
	status, _, out := api.Do("POST", "/api/definitions", "guest", string(raw))
	require.Equal(t, 204, status, "%s", out)

	dch := amqptest.Channel(t, brokertest.Dial(t, down))
	require.NoError(t, dch.ExchangeDeclare("fed.orders", "fanout", true, false, false, false, nil))
	amqptest.DeclareQueue(t, dch, "copy", false)
	require.NoError(t, dch.QueueBind("copy", "", "fed.orders", false, nil))
	l := waitLink(t, api, "running")
	require.Equal(t, "origin", l["upstream"])
	// The upstream queue has the exported expires.
	upAPI := amqptest.NewAPI(t, up.ManagementHandler())
	q := upAPI.Get("/api/queues/%2F/" + url.PathEscape("federation: fed.orders -> down")).(map[string]any)
	require.EqualValues(t, 3600000, q["arguments"].(map[string]any)["x-expires"])
	require.Eventually(t, func() bool { return len(sourceBindings(upAPI, "fed.orders")) == 1 }, 10*time.Second, 20*time.Millisecond)

	amqptest.Publish(t, amqptest.ConfirmChannel(t, brokertest.Dial(t, up)), "fed.orders", "", "order 1")
	require.Eventually(t, func() bool {
		m, ok, _ := dch.Get("copy", true)
		return ok && string(m.Body) == "order 1"
	}, 10*time.Second, 5*time.Millisecond)
}

// localLinkConnection is the name of the connection a federation link
// opened into b, "" when none is listed.
func localLinkConnection(t *testing.T, api *amqptest.API) string {
	t.Helper()
	for _, c := range api.Get("/api/connections").([]any) {
		c := c.(map[string]any)
		if c["user_provided_name"] == "Federation link (upstream: up, policy: fed)" {
			return c["name"].(string)
		}
	}
	return ""
}

// TestFederationLinkRestart: RabbitMQ 3.10.8's
// DELETE /api/federation-links/vhost/{vhost}/{id}/{node}/restart stops
// a link and starts it again (new connections, the same upstream queue,
// messages still flow); an unknown vhost, id or node is 404.
func TestFederationLinkRestart(t *testing.T) {
	up, down := newFederated(t, "up"), newFederated(t, "down")
	api := amqptest.NewAPI(t, down.ManagementHandler())
	putUpstream(t, down, "up", map[string]any{"uri": up.URL(), "reconnect-delay": 1})
	putFederationPolicy(t, down, "fed", `^fed$`, "exchanges", "up")
	dch := amqptest.Channel(t, brokertest.Dial(t, down))
	require.NoError(t, dch.ExchangeDeclare("fed", "fanout", true, false, false, false, nil))
	amqptest.DeclareQueue(t, dch, "q", false)
	require.NoError(t, dch.QueueBind("q", "", "fed", false, nil))
	l := waitLink(t, api, "running")
	before := localLinkConnection(t, api)
	require.NotEmpty(t, before)

	id, node := l["id"].(string), url.PathEscape(l["node"].(string))
	for _, path := range []string{
		"/api/federation-links/vhost/nope/" + id + "/" + node + "/restart",
		"/api/federation-links/vhost/%2F/00000000/" + node + "/restart",
		"/api/federation-links/vhost/%2F/" + id + "/other%40node/restart",
	} {
		status, _, body := api.Do("DELETE", path, "guest", nil)
		require.Equal(t, 404, status, "%s: %s", path, body)
	}
	status, _, body := api.Do("DELETE", "/api/federation-links/vhost/%2F/"+id+"/"+node+"/restart", "guest", nil)
	require.Equal(t, 204, status, "%s", body)
	require.Eventually(t, func() bool {
		now := localLinkConnection(t, api)
		return now != "" && now != before && len(federationLinks(api)) == 1 && federationLinks(api)[0]["status"] == "running"
	}, 20*time.Second, 20*time.Millisecond, "the link did not come back on a new connection")
	require.Equal(t, id, federationLinks(api)[0]["id"])

	uconn, upAPI := brokertest.Dial(t, up), amqptest.NewAPI(t, up.ManagementHandler())
	require.Eventually(t, func() bool { return sourceBindings(upAPI, "fed")[""] }, 10*time.Second, 20*time.Millisecond)
	amqptest.Publish(t, amqptest.ConfirmChannel(t, uconn), "fed", "", "after restart")
	require.Eventually(t, func() bool {
		m, ok, _ := dch.Get("q", true)
		return ok && string(m.Body) == "after restart"
	}, 10*time.Second, 5*time.Millisecond)
}

// TestFederationUpstreamPattern: a policy's federation-upstream-pattern
// federates from every upstream whose name the expression matches
// (RabbitMQ 3.10.8's find_contents), following upstreams as they come
// and go; a pattern that does not compile is refused.
func TestFederationUpstreamPattern(t *testing.T) {
	up, down := newFederated(t, "up"), newFederated(t, "down")
	api := amqptest.NewAPI(t, down.ManagementHandler())
	putUpstream(t, down, "dc-east", map[string]any{"uri": up.URL(), "reconnect-delay": 1})
	putUpstream(t, down, "backup", map[string]any{"uri": up.URL(), "reconnect-delay": 1})
	ctx := context.Background()
	require.NoError(t, down.Admin().PutPolicy(ctx, broker.Policy{VHost: "/", Name: "fed", Pattern: `^fed$`, ApplyTo: "exchanges",
		Definition: map[string]any{"federation-upstream-pattern": "^dc-"}}))
	err := down.Admin().PutPolicy(ctx, broker.Policy{VHost: "/", Name: "bad", Pattern: `^x$`,
		Definition: map[string]any{"federation-upstream-pattern": "(dc"}})
	require.ErrorContains(t, err, "could not compile pattern (dc to a regular expression")
	dch := amqptest.Channel(t, brokertest.Dial(t, down))
	require.NoError(t, dch.ExchangeDeclare("fed", "fanout", true, false, false, false, nil))

	upstreams := func() []string {
		var out []string
		for _, l := range federationLinks(api) {
			if l["status"] == "running" {
				out = append(out, l["upstream"].(string))
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return strings.Join(upstreams(), ",") == "dc-east" }, 20*time.Second, 20*time.Millisecond)
	putUpstream(t, down, "dc-west", map[string]any{"uri": up.URL(), "reconnect-delay": 1})
	require.Eventually(t, func() bool { return strings.Join(upstreams(), ",") == "dc-east,dc-west" }, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, down.Admin().DeleteParameter(ctx, "federation-upstream", "/", "dc-east"))
	require.Eventually(t, func() bool { return strings.Join(upstreams(), ",") == "dc-west" }, 20*time.Second, 20*time.Millisecond)
}
