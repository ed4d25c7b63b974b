package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/storage"
)

// Every message a queue counts as dead-lettered (DeadLetterCounts, the
// broker's dead_lettered metrics) is one event with the same reason, on
// every path that counts, without a dead-letter exchange here: Discarded.
func TestDeathEventsAgreeWithCounters(t *testing.T) {
	ctx := context.Background()
	settleEach := func(t *testing.T, q *Queue, n int, how Outcome) {
		for range n {
			m, _, ok, err := q.Get(ctx, owner, false)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, q.Settle(how, m.Ref))
		}
	}
	tests := []struct {
		name   string
		args   amqp.Table
		reason string
		kind   events.Kind
		n      int
		first  int // the first message that dies: m-<first>
		run    func(t *testing.T, q *Queue, clk *clock.Fake)
	}{
		{"rejected", nil, ReasonRejected, events.MessageDeadLettered, 2, 0, func(t *testing.T, q *Queue, _ *clock.Fake) {
			publishIDs(t, q, "m-0", "m-1")
			settleEach(t, q, 2, Reject)
		}},
		{"maxlen, drop-head", amqp.Table{"x-max-length": int32(1)}, ReasonMaxLen, events.MessageDeadLettered, 2, 0, func(t *testing.T, q *Queue, _ *clock.Fake) {
			publishIDs(t, q, "m-0", "m-1", "m-2")
		}},
		{"maxlen, reject-publish-dlx", amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish-dlx"}, ReasonMaxLen, events.MessageDeadLettered, 2, 1, func(t *testing.T, q *Queue, _ *clock.Fake) {
			publishIDs(t, q, "m-0", "m-1", "m-2") // the publishes that find it full
		}},
		{"delivery limit", amqp.Table{"x-delivery-limit": int32(0)}, ReasonDeliveryLimit, events.MessageDeadLettered, 1, 0, func(t *testing.T, q *Queue, _ *clock.Fake) {
			publishIDs(t, q, "m-0")
			settleEach(t, q, 1, Requeue)
		}},
		{"expired", amqp.Table{"x-message-ttl": int32(10)}, ReasonExpired, events.MessageExpired, 2, 0, func(t *testing.T, q *Queue, clk *clock.Fake) {
			publishIDs(t, q, "m-0", "m-1")
			waitReady(t, q, 2)
			clk.Advance(time.Second)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(100, 0))
			hub := events.NewHub(clk)
			subCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			evs := events.Subscribe(subCtx, hub, 64, events.All, func(e events.Event, _ time.Time, _ uint64) events.Event { return e })
			a, err := ParseArgs(tc.args)
			require.NoError(t, err)
			var totals Counters
			q, err := Start(ctx, Config{
				VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1,
				Clock: clk, Features: Features{Args: a}, Totals: &totals, Events: hub,
			})
			require.NoError(t, err)
			t.Cleanup(q.Stop)
			tc.run(t, q, clk)

			for i := range tc.n {
				select {
				case e := <-evs:
					require.Equal(t, events.Event{
						Kind: tc.kind, VHost: "/", Queue: "q", RoutingKey: "q", MessageID: fmt.Sprint("m-", tc.first+i),
						Reason: tc.reason, Discarded: true,
					}, e)
				case <-time.After(10 * time.Second):
					t.Fatalf("%d events, want %d", i, tc.n)
				}
			}
			var counted uint64
			for _, c := range totals.DeadLettered.Load() {
				if c.Reason == tc.reason {
					counted += c.N
				} else {
					require.Zero(t, c.N, "reason %s", c.Reason)
				}
			}
			require.Equal(t, uint64(tc.n), counted, "one event per message counted")
			require.Empty(t, evs, "no more events than counted messages")
		})
	}
}

// publishIDs publishes one message per id, routing key "q".
func publishIDs(t *testing.T, q *Queue, ids ...string) {
	t.Helper()
	for _, id := range ids {
		props := (&amqp.Properties{MessageID: id}).Append(nil)
		require.NoError(t, q.Publish(storage.Record{RoutingKey: "q", Properties: props, Body: []byte(id)}, NoTTL, nil, 0))
	}
}
