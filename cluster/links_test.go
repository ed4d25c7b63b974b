package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/cluster"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestShovelRunsOnOneMemberAndMovesWhenItDies stores one on-confirm
// shovel in a three-member cluster, draining a queue of another broker
// into a cluster queue. Exactly one member runs it (no two members ever
// list it, running or connecting, with themselves as its node, and the
// source queue never has two consumers); every member lists it with the
// node that runs it; when that member is killed (cut off, then stopped)
// another member takes the link over, the others list it on that one,
// and every message arrives, duplicates only within the prefetch.
func TestShovelRunsOnOneMemberAndMovesWhenItDies(t *testing.T) {
	const n, prefetch = 4000, 50
	// A lease of 3 s: renewals are raft writes, which a loaded test
	// machine can delay past the 1 s DeadAfter's third.
	c := newTestCluster(t, func(cfg *cluster.Config) { cfg.Broker.LinkLease = 3 * time.Second })
	src, sch := shovelFromOutside(t, c, n, prefetch, nil)

	// Watch, until the test ends, which members report the link running
	// and how many consumers the source queue has.
	var holder atomic.Int32 // 1+index of the member seen running it, 0 for none
	var twice, twoConsumers atomic.Value
	var starts atomic.Int32 // times a member was seen (re)starting the link
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		probe := amqptest.Channel(t, brokertest.Dial(t, src))
		last := make([]string, len(c.nodes))
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var running, present []int
			for i, node := range c.nodes {
				b := node.Broker()
				if b == nil {
					continue
				}
				// The listing is cluster-wide: what runs here is what
				// this member lists on itself.
				links, err := linksOn(b, "/api/shovels", true)
				if err != nil || len(links) > 1 {
					continue
				}
				if len(links) == 0 {
					links = append(links, linkRow{State: "not here"})
				}
				switch links[0].State {
				case "running":
					running = append(running, i)
					present = append(present, i)
				case "starting": // a worker here, connecting: it counts too
					present = append(present, i)
				}
				if st := fmt.Sprintf("member %d: %s %s", i+1, links[0].State, links[0].Reason); st != last[i] {
					if links[0].State == "starting" {
						starts.Add(1)
					}
					last[i] = st
					t.Log(st)
				}
			}
			if len(present) > 1 {
				twice.CompareAndSwap(nil, present)
			}
			if len(running) == 1 {
				holder.Store(int32(running[0] + 1))
			}
			if q, err := probe.QueueDeclarePassive("in", true, false, false, false, nil); err == nil && q.Consumers > 1 {
				twoConsumers.CompareAndSwap(nil, q.Consumers)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	waitUntil := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(waitFor); !f(); time.Sleep(5 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "waiting for %s", what)
		}
	}
	waitUntil("a member to run the shovel", func() bool { return holder.Load() != 0 })
	first := int(holder.Load() - 1)
	waitListedOn(t, c, "/api/shovels", first)
	other := (first + 1) % 3
	_, och := c.dial(other)
	depth := func() int {
		q, err := och.QueueDeclarePassive("out", true, false, false, false, nil)
		if err != nil {
			return -1
		}
		return q.Messages
	}
	waitUntil("a quarter moved", func() bool { return depth() >= n/4 })
	c.kill(first)
	killedAt := depth()
	t.Logf("killed member %d, the one running the shovel, with %d of %d moved", first+1, killedAt, n)
	require.Less(t, killedAt, n, "the shovel was done before its member was killed")
	waitUntil("another member to run the shovel", func() bool { h := holder.Load(); return h != 0 && int(h-1) != first })
	t.Logf("member %d runs it now", holder.Load())
	waitListedOn(t, c, "/api/shovels", int(holder.Load()-1))
	waitUntil("the source drained", func() bool {
		q, err := sch.QueueDeclarePassive("in", true, false, false, false, nil)
		return err == nil && q.Messages == 0 && depth() >= n
	})

	_, dups := consumeAll(t, och, "out", n, func() string { return "" })
	// Each restart of the link after the first (the takeover, and any
	// reconnect while the cluster elects a new leader) redelivers at most
	// one window.
	restarts := max(1, int(starts.Load())-1)
	t.Logf("%d messages, %d duplicates, %d restarts", n, dups, restarts)
	require.LessOrEqual(t, dups, prefetch*restarts, "each restart redelivers at most its window")
	require.Nil(t, twice.Load(), "members seen running the link at once")
	require.Nil(t, twoConsumers.Load(), "consumers on the source at once")
}

// shovelFromOutside fills queue in of a broker outside the cluster with
// n persistent messages and stores (through member 2) the on-confirm
// shovel drain from it into the cluster's queue out; before, when not
// nil, runs between the two. It returns the broker and a confirm
// channel on it.
func shovelFromOutside(t *testing.T, c *testCluster, n, prefetch int, before func(src *broker.Broker)) (*broker.Broker, *amqp091.Channel) {
	t.Helper()
	src := brokertest.New(t)
	sch := amqptest.ConfirmChannel(t, brokertest.Dial(t, src))
	amqptest.DeclareQueue(t, sch, "in", true)
	amqptest.PublishConfirmed(t, sch, "in", true, amqptest.Numbered("m", n)...)
	if before != nil {
		before(src)
	}
	value, err := json.Marshal(map[string]any{
		"src-uri": src.URL(), "src-queue": "in", "dest-uri": "amqp://", "dest-queue": "out",
		"ack-mode": "on-confirm", "src-prefetch-count": prefetch, "reconnect-delay": 0.1,
	})
	require.NoError(t, err)
	_, err = c.broker(1).Admin().PutParameter(context.Background(),
		broker.Parameter{Component: "shovel", VHost: "/", Name: "drain", Value: value})
	require.NoError(t, err)
	return src, sch
}

// consumeAll consumes queue on ch until n distinct bodies arrived, then
// whatever duplicates follow within a quiet second, and returns how many
// times each arrived and the duplicates; it fails after waitFor, saying
// what more says.
func consumeAll(t *testing.T, ch *amqp091.Channel, queue string, n int, more func() string) (map[string]int, int) {
	t.Helper()
	seen := map[string]int{}
	require.NoError(t, ch.Qos(500, 0, false))
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	require.NoError(t, err)
	deadline := time.After(waitFor)
	for idle := time.NewTimer(time.Hour); ; {
		select {
		case m := <-deliveries:
			seen[string(m.Body)]++
			require.NoError(t, m.Ack(false))
			if len(seen) == n {
				idle.Reset(time.Second)
			}
			continue
		case <-deadline:
			t.Fatalf("%d of %d arrived%s", len(seen), n, more())
		case <-idle.C:
		}
		break
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	return seen, dups
}

// linkRow is a row of GET /api/shovels or /api/federation-links.
type linkRow struct{ Node, State, Status, Reason string }

// linksOn lists path on member b: with here, only the rows that name b
// as the node running them.
func linksOn(b *broker.Broker, path string, here bool) ([]linkRow, error) {
	body, err := httpGet(b.ManagementHandler(), "/api/overview")
	if err != nil {
		return nil, err
	}
	var ov struct{ Node string }
	if err := json.Unmarshal(body, &ov); err != nil {
		return nil, err
	}
	if body, err = httpGet(b.ManagementHandler(), path); err != nil {
		return nil, err
	}
	var rows []linkRow
	if err := json.Unmarshal(body, &rows); err != nil {
		return nil, err
	}
	out := rows[:0]
	for _, r := range rows {
		if !here || r.Node == ov.Node {
			out = append(out, r)
		}
	}
	return out, nil
}

// waitListedOn waits until every live member's path lists one link, on
// member runs's node.
func waitListedOn(t *testing.T, c *testCluster, path string, runs int) {
	t.Helper()
	own, err := linksOn(c.nodes[runs].Broker(), path, true)
	require.NoError(t, err)
	require.Len(t, own, 1, "member %d lists the link it runs", runs+1)
	body, err := httpGet(c.nodes[runs].Broker().ManagementHandler(), "/api/overview")
	require.NoError(t, err)
	var ov struct{ Node string }
	require.NoError(t, json.Unmarshal(body, &ov))
	for deadline := time.Now().Add(waitFor); ; time.Sleep(5 * time.Millisecond) {
		ok := true
		for _, node := range c.nodes {
			b := node.Broker()
			if b == nil {
				continue
			}
			rows, err := linksOn(b, path, false)
			ok = ok && err == nil && len(rows) == 1 && rows[0].Node == ov.Node
		}
		if ok {
			return
		}
		require.True(t, time.Now().Before(deadline), "waiting for every member to list the link on %s", ov.Node)
	}
}
