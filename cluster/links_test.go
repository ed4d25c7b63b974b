package cluster_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/cluster"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestShovelRunsOnOneMemberAndMovesWhenItDies stores one on-confirm
// shovel in a three-member cluster, draining a queue of another broker
// into a cluster queue. Exactly one member runs it (each member's
// GET /api/shovels lists it only where it runs, and the source queue
// never has two consumers); when that member is killed (cut off, then
// stopped) another member takes the link over, and every message
// arrives, duplicates only within the prefetch.
func TestShovelRunsOnOneMemberAndMovesWhenItDies(t *testing.T) {
	const n, prefetch = 4000, 50
	// A lease of 3 s: renewals are raft writes, which a loaded test
	// machine can delay past the 1 s DeadAfter's third.
	c := newTestCluster(t, func(cfg *cluster.Config) { cfg.Broker.LinkLease = 3 * time.Second })
	src := brokertest.New(t)
	sch := amqptest.ConfirmChannel(t, brokertest.Dial(t, src))
	amqptest.DeclareQueue(t, sch, "in", true)
	amqptest.PublishConfirmed(t, sch, "in", true, amqptest.Numbered("m", n)...)

	value, err := json.Marshal(map[string]any{
		"src-uri": src.URL(), "src-queue": "in", "dest-uri": "amqp://", "dest-queue": "out",
		"ack-mode": "on-confirm", "src-prefetch-count": prefetch, "reconnect-delay": 0.1,
	})
	require.NoError(t, err)
	_, err = c.broker(1).Admin().PutParameter(context.Background(),
		broker.Parameter{Component: "shovel", VHost: "/", Name: "drain", Value: value})
	require.NoError(t, err)

	// Watch, until the test ends, which members report the link running
	// and how many consumers the source queue has.
	var holder atomic.Int32 // 1+index of the member seen running it, 0 for none
	var twice, twoConsumers atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		probe := amqptest.Channel(t, brokertest.Dial(t, src))
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var running []int
			for i, node := range c.nodes {
				b := node.Broker()
				if b == nil {
					continue
				}
				body, err := httpGet(b.ManagementHandler(), "/api/shovels")
				if err != nil {
					continue
				}
				var links []struct{ State string }
				if json.Unmarshal(body, &links) == nil && len(links) == 1 && links[0].State == "running" {
					running = append(running, i)
				}
			}
			if len(running) > 1 {
				twice.CompareAndSwap(nil, running)
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
	waitUntil("the source drained", func() bool {
		q, err := sch.QueueDeclarePassive("in", true, false, false, false, nil)
		return err == nil && q.Messages == 0 && depth() >= n
	})

	seen := map[string]int{}
	require.NoError(t, och.Qos(500, 0, false))
	deliveries, err := och.Consume("out", "", false, false, false, false, nil)
	require.NoError(t, err)
	// Every id, then whatever duplicates follow within a quiet second.
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
			t.Fatalf("%d of %d arrived", len(seen), n)
		case <-idle.C:
		}
		break
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	t.Logf("%d messages, %d duplicates", n, dups)
	require.LessOrEqual(t, dups, prefetch, "the killed member redelivers at most its window")
	require.Nil(t, twice.Load(), "members seen running the link at once")
	require.Nil(t, twoConsumers.Load(), "consumers on the source at once")
}
