package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/cluster"
	"github.com/warrenmq/broker/internal/amqptest"
)

// httpDelete sends DELETE path to h as guest and returns the status.
func httpDelete(h http.Handler, path string) (int, error) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest("DELETE", srv.URL+path, nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := srv.Client().Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// nodeName is member b's node name, as its /api/overview says.
func nodeName(t *testing.T, b *broker.Broker) string {
	t.Helper()
	body, err := httpGet(b.ManagementHandler(), "/api/overview")
	require.NoError(t, err)
	var ov struct{ Node string }
	require.NoError(t, json.Unmarshal(body, &ov))
	return ov.Node
}

// runner waits until one member lists path's one link as running with
// itself as its node, and returns it.
func runner(t *testing.T, c *testCluster, path string) int {
	t.Helper()
	for deadline := time.Now().Add(waitFor); ; time.Sleep(5 * time.Millisecond) {
		for i, node := range c.nodes {
			b := node.Broker()
			if b == nil {
				continue
			}
			rows, err := linksOn(b, path, true)
			if err == nil && len(rows) == 1 && (rows[0].State == "running" || rows[0].Status == "running") {
				return i
			}
		}
		require.True(t, time.Now().Before(deadline), "waiting for a member to run the link of %s", path)
	}
}

// connectionsMade counts the connections b accepts from now on.
func connectionsMade(t *testing.T, b *broker.Broker) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	evs := b.Events(ctx, 64, broker.ConnectionCreated)
	n := 0
	return func() int {
		for {
			select {
			case <-evs:
				n++
				continue
			default:
			}
			return n
		}
	}
}

// TestShovelRestartsThroughAnyMember restarts a running on-confirm
// shovel with DELETE /api/shovels/vhost/{vhost}/{name}/restart sent to a
// member that does not run it: 204, and the member that runs it has
// stopped its link and started it again (a new connection to the source,
// running again, still on that member); an unknown shovel is 404 there;
// every message arrives, duplicates only within the prefetch.
func TestShovelRestartsThroughAnyMember(t *testing.T) {
	const n, prefetch = 5000, 50
	c := newTestCluster(t, func(cfg *cluster.Config) { cfg.Broker.LinkLease = 3 * time.Second })
	var made func() int // the connections to the source, from before the shovel is stored
	src, _ := shovelFromOutside(t, c, n, prefetch, func(src *broker.Broker) { made = connectionsMade(t, src) })

	runs := runner(t, c, "/api/shovels")
	other := (runs + 1) % 3
	_, och := c.dial(other)
	depth := depthOf(och, "out")
	require.Eventually(t, func() bool { return depth() >= prefetch }, waitFor, 5*time.Millisecond, "a window moved")
	require.Equal(t, 1, made(), "one connection to the source before the restart")

	h := c.broker(other).ManagementHandler()
	code, err := httpDelete(h, "/api/shovels/vhost/%2F/drain/restart")
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, code)
	at := depth()
	t.Logf("restarted through member %d with %d of %d moved; member %d runs it", other+1, at, n, runs+1)
	require.Less(t, at, n, "the shovel was done before the restart")
	require.Eventually(t, func() bool { return made() == 2 }, waitFor, 5*time.Millisecond,
		"the member running the link connects to the source again")
	require.Equal(t, runs, runner(t, c, "/api/shovels"), "restarted where it ran")

	code, err = httpDelete(h, "/api/shovels/vhost/%2F/nothere/restart")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, code)

	srcIn := func() (ready, unacked uint64) {
		for _, q := range src.Stats(context.Background()).QueueDetails {
			if q.Name == "in" {
				return q.Ready, q.Unacked
			}
		}
		return 0, 0
	}
	require.Eventually(t, func() bool {
		ready, unacked := srcIn()
		return ready == 0 && unacked == 0 && depth() >= n
	}, waitFor, 10*time.Millisecond, "the source drained")
	_, dups := consumeAll(t, och, "out", n, func() string {
		ready, unacked := srcIn()
		return fmt.Sprintf("; the source holds %d ready, %d unacked; out's depth %d", ready, unacked, depth())
	})
	t.Logf("%d messages, %d duplicates", n, dups)
	require.LessOrEqual(t, dups, prefetch, "the restart redelivers at most its window")
}

// TestFederationLinkRestartsThroughAnyMember restarts a federated
// exchange's link with DELETE
// /api/federation-links/vhost/{vhost}/{id}/{node}/restart sent to a
// member that does not run it, naming the member that does: 204, and
// that member's link connects to the upstream again, runs again there,
// and its forwarded count goes on from where it was; naming a member
// that does not run it is 404, as RabbitMQ's lookup on that node is.
func TestFederationLinkRestartsThroughAnyMember(t *testing.T) {
	c := newTestCluster(t, func(cfg *cluster.Config) { cfg.Broker.LinkLease = 3 * time.Second })
	up := federateFromOutside(t, c)
	made := connectionsMade(t, up)

	runs := runner(t, c, "/api/federation-links")
	waitListedOn(t, c, "/api/federation-links", runs)
	other := (runs + 1) % 3
	_, och := c.dial(other)
	depth := depthOf(och, "out")
	uch := amqptest.ConfirmChannel(t, brokertest.Dial(t, up))
	publish := func(from, n int) {
		for i := range n {
			amqptest.Publish(t, uch, "fed", "", fmt.Sprint("m", from+i))
		}
	}
	// The link's upstream queue and binding are in place once a
	// message published upstream arrives.
	require.Eventually(t, func() bool { publish(0, 1); return depth() > 0 }, waitFor, 100*time.Millisecond)
	forwarded := func() int64 {
		var rows []struct {
			Node              string
			MessagesForwarded int64 `json:"messages_forwarded"`
			ID                string
		}
		body, err := httpGet(c.broker(runs).ManagementHandler(), "/api/federation-links")
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(body, &rows))
		require.Len(t, rows, 1)
		return rows[0].MessagesForwarded
	}
	// Settled: nothing more in flight.
	before, last := -1, -2
	require.Eventually(t, func() bool {
		d := depth()
		before, last = d, before
		return d == last && forwarded() == int64(d)
	}, waitFor, 300*time.Millisecond)
	conns := made()

	var rows []struct{ ID, Node string }
	body, err := httpGet(c.broker(other).ManagementHandler(), "/api/federation-links")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(body, &rows))
	require.Len(t, rows, 1)
	require.Equal(t, nodeName(t, c.broker(runs)), rows[0].Node, "listed on the member running it")
	h := c.broker(other).ManagementHandler()
	code, err := httpDelete(h, "/api/federation-links/vhost/%2F/"+rows[0].ID+"/"+nodeName(t, c.broker(other))+"/restart")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, code, "the link does not run on the member named")
	code, err = httpDelete(h, "/api/federation-links/vhost/%2F/"+rows[0].ID+"/"+rows[0].Node+"/restart")
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, code)
	require.Eventually(t, func() bool { return made() > conns }, waitFor, 5*time.Millisecond,
		"the member running the link connects to the upstream again")
	require.Equal(t, runs, runner(t, c, "/api/federation-links"), "restarted where it ran")

	publish(1000, 10)
	require.Eventually(t, func() bool { return depth() == before+10 }, waitFor, 5*time.Millisecond,
		"what is published after the restart arrives")
	require.Eventually(t, func() bool { return forwarded() == int64(before+10) }, waitFor, 5*time.Millisecond,
		"the forwarded count goes on")
}
