package broker_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/measure"
)

// declareHolding declares n queues named prefix0.. and publishes one
// message to each.
func declareHolding(t *testing.T, b *broker.Broker, ch *broker.Channel, prefix string, n int, durable bool) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("%s%d", prefix, i)
		_, err := ch.QueueDeclare(name, durable, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.PublishWithContext(context.Background(), "", name, false, false,
			amqp091.Publishing{Body: []byte("x"), DeliveryMode: amqp091.Persistent}))
	}
	// The publishes reached every actor: each queue holds its message.
	// One Stats call asks every actor, so the check stays linear in n.
	ready := map[string]uint64{}
	for _, q := range b.Stats(context.Background()).QueueDetails {
		ready[q.Name] = q.Ready
	}
	for i := range n {
		name := fmt.Sprintf("%s%d", prefix, i)
		require.EqualValues(t, 1, ready[name], name)
	}
}

// An idle queue holding one message costs a few KiB of heap, not the
// 311,296-byte mailbox every queue used to preallocate (10,000 such
// queues took 3-4 GiB), and no goroutine: its actor's exits once idle
// (internal/queue, "Lifecycle"), and with it the stack it held. A
// transient queue also holds the in-memory store's first chunk of slots
// (about 15 KiB, storage/memory).
func TestEngineIdleQueueHeap(t *testing.T) {
	const n = 500
	for _, tc := range []struct {
		name     string
		durable  bool
		perQueue int64
	}{
		{"durable", true, 5 << 10},
		{"transient", false, 24 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := brokertest.NewUnstarted(t, broker.Options{DataDir: t.TempDir()})
			ch := brokertest.Channel(t, b)
			g0 := runtime.NumGoroutine()
			declareHolding(t, b, ch, "warm", 10, tc.durable) // first-use allocations
			idle := func(limit int) {
				require.Eventually(t, func() bool { return runtime.NumGoroutine() <= limit }, 10*time.Second, 10*time.Millisecond,
					"idle queues keep goroutines")
			}
			idle(g0 + 2)
			baseG := runtime.NumGoroutine()
			base := measure.LiveHeap()
			declareHolding(t, b, ch, "q", n, tc.durable)
			idle(baseG + n/20) // the actors have exited (the stores may start a goroutine or two)
			per := (measure.LiveHeap() - base) / n
			t.Logf("%s: %d bytes of heap per idle queue holding one message", tc.name, per)
			require.Less(t, per, tc.perQueue)
		})
	}
}

// Deleted queues give their memory back, also while a channel still holds
// an unacked delivery of theirs (its delivery tag stays valid until the
// channel settles it or closes): declare/delete rounds grew the heap by
// the whole queue each time.
func TestEngineDeletedQueuesReturnTheirHeap(t *testing.T) {
	const n = 500
	b := brokertest.NewUnstarted(t, broker.Options{})
	round := func(ch *broker.Channel, n int) {
		declareHolding(t, b, ch, "q", n, false)
		for i := range n {
			_, ok, err := ch.Get(fmt.Sprintf("q%d", i), false) // left unacked
			require.NoError(t, err)
			require.True(t, ok)
		}
		for i := range n {
			_, err := ch.QueueDelete(fmt.Sprintf("q%d", i), false, false, false)
			require.NoError(t, err)
		}
	}
	warm := brokertest.Channel(t, b)
	round(warm, 10) // first-use allocations: lazy package state, map buckets
	require.NoError(t, warm.Close())
	ch := brokertest.Channel(t, b)
	base := measure.LiveHeap()
	for r := range 3 {
		round(ch, n)
		per := (measure.LiveHeap() - base) / int64((r+1)*n)
		t.Logf("round %d: %d bytes of heap per deleted queue with an unacked delivery", r, per)
		require.Less(t, per, int64(4<<10), "round %d", r)
	}
	require.NoError(t, ch.Close())
	per := (measure.LiveHeap() - base) / (3 * n)
	t.Logf("channel closed: %d bytes of heap per deleted queue", per)
	require.Less(t, per, int64(512))
}

// Queues declared and deleted in bursts leave the broker's heap where it
// was, whatever the door and the stores. Each burst declares n queues and
// then deletes them all; after the bursts the live heap may have grown by
// churnBudget bytes per queue of a burst at most: a few small tables, not
// the queues' own. It grew by about 650 bytes per queue of the largest
// burst (some 10 MB after bursts of 15,000): every declare-ok asked the new
// queue's actor for its counts, which kept the actor's goroutine for its
// idle period, so a burst ran one goroutine per queue at once, and the
// runtime keeps the record of every goroutine it ever ran at once; and the
// maps of queues, routes, cursors and rates kept the table of their
// largest size.
func TestEngineQueueChurnKeepsNoMemory(t *testing.T) {
	const churnBudget = 100 // bytes per queue of a burst
	doors := []struct {
		name string
		open func(t *testing.T, b *broker.Broker) parityChannel
	}{
		{"tcp", func(t *testing.T, b *broker.Broker) parityChannel {
			brokertest.Start(t, b)
			conn, err := amqp091.Dial(b.URL())
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			ch, err := conn.Channel()
			require.NoError(t, err)
			return ch
		}},
		{"dial", func(t *testing.T, b *broker.Broker) parityChannel {
			ch, err := brokertest.Dial(t, b).Channel()
			require.NoError(t, err)
			return ch
		}},
		{"direct", func(t *testing.T, b *broker.Broker) parityChannel {
			return brokertest.Channel(t, b)
		}},
	}
	for _, tc := range []struct {
		stores  string
		doors   []string
		n       int // queues per burst
		bursts  int
		durable bool
	}{
		{"memory", []string{"tcp", "dial", "direct"}, 10_000, 3, false},
		// Durable, so the queues' metadata and cursors are Pebble's; each
		// declare and delete waits for an fsync, hence fewer queues.
		{"datadir", []string{"tcp", "dial", "direct"}, 5_000, 1, true},
	} {
		for _, door := range doors {
			if !slices.Contains(tc.doors, door.name) {
				continue
			}
			t.Run(tc.stores+"/"+door.name, func(t *testing.T) {
				opts := broker.Options{}
				if tc.stores == "datadir" {
					if raceEnabled {
						// Half of Pebble's race builds allocate its
						// block cache in the Go heap, which then grows
						// with what the bursts wrote.
						t.Skip("Pebble's cache may be in the heap under the race detector")
					}
					opts.DataDir = t.TempDir()
				}
				b := brokertest.NewUnstarted(t, opts)
				ch := door.open(t, b)
				burst := func(prefix string, n int) {
					for i := range n {
						_, err := ch.QueueDeclare(fmt.Sprintf("%s%d", prefix, i), tc.durable, false, false, false, nil)
						require.NoError(t, err)
					}
					for i := range n {
						_, err := ch.QueueDelete(fmt.Sprintf("%s%d", prefix, i), false, false, false)
						require.NoError(t, err)
					}
				}
				burst("warm", 10) // first-use allocations
				base := measure.LiveHeap()
				for r := range tc.bursts {
					burst(fmt.Sprintf("q%d-", r), tc.n)
					grown := measure.LiveHeap() - base
					t.Logf("after %d bursts of %d queues: live heap %+d KiB, %d bytes per queue of a burst", r+1, tc.n, grown>>10, grown/int64(tc.n))
					require.Less(t, grown, int64(churnBudget*tc.n), "burst %d", r+1)
				}
			})
		}
	}
}
