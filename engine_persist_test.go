package broker_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/faultstore"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// Durability as in RabbitMQ: persistent messages in durable queues survive
// a restart on the same DataDir, transient messages and non-durable queues
// do not, and what was unacked at shutdown comes back redelivered.
func TestEnginePersistenceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	b1, err := broker.New(broker.Options{DataDir: dir})
	require.NoError(t, err)
	_, err = b1.Listen("127.0.0.1:0")
	require.NoError(t, err)
	conn := amqptest.Dial(t, b1.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "durable", true)
	amqptest.DeclareQueue(t, ch, "fleeting", false)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 16))
	pub := func(queue, body string, persistent bool) {
		mode := amqp091.Transient
		if persistent {
			mode = amqp091.Persistent
		}
		require.NoError(t, ch.PublishWithContext(context.Background(), "", queue, false, false,
			amqp091.Publishing{Body: []byte(body), DeliveryMode: mode, MessageId: body}))
		select {
		case c := <-confirms:
			require.True(t, c.Ack)
		case <-time.After(amqptest.Timeout):
			t.Fatal("no confirm")
		}
	}
	pub("durable", "p1", true)
	pub("durable", "t1", false)
	pub("durable", "p2", true)
	pub("durable", "t2", false)
	pub("durable", "p3", true)
	pub("fleeting", "f1", true)
	// p1 is out, unacked, when the broker stops; p2 was acked.
	d1 := amqptest.Get(t, ch, "durable", false)
	require.Equal(t, "p1", string(d1.Body))
	d2 := amqptest.Get(t, ch, "durable", false)
	require.Equal(t, "t1", string(d2.Body))
	require.NoError(t, d2.Ack(false))
	waitStats(t, b1, "durable", func(st queueCounts) bool { return st.Unacked == 1 })
	require.NoError(t, b1.Close())

	b2 := startBroker(t, broker.Options{DataDir: dir})
	ch2 := amqptest.Channel(t, amqptest.Dial(t, b2.URL(), amqp091.Config{}))
	q, err := ch2.QueueDeclarePassive("durable", true, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 3, q.Messages, "p1 (returned), p2, p3; no transient message")
	var bodies []string
	var redelivered []bool
	for range 3 {
		d := amqptest.Get(t, ch2, "durable", false)
		bodies = append(bodies, string(d.Body))
		redelivered = append(redelivered, d.Redelivered)
		require.Equal(t, uint8(amqp091.Persistent), d.DeliveryMode, "properties survive")
		require.Equal(t, string(d.Body), d.MessageId)
		require.NoError(t, d.Ack(false))
	}
	require.Equal(t, []string{"p1", "p2", "p3"}, bodies)
	require.Equal(t, []bool{true, false, false}, redelivered)
	amqptest.RequireEmpty(t, ch2, "durable")

	_, err = ch2.QueueDeclarePassive("fleeting", false, false, false, false, nil)
	amqptest.RequireCode(t, err, amqp091.NotFound)

	// Acks are durable too: nothing comes back after another restart.
	require.NoError(t, b2.Close())
	b3 := startBroker(t, broker.Options{DataDir: dir})
	ch3 := amqptest.Channel(t, amqptest.Dial(t, b3.URL(), amqp091.Config{}))
	q, err = ch3.QueueDeclarePassive("durable", true, false, false, false, nil)
	require.NoError(t, err)
	require.Zero(t, q.Messages)
}

// A publish whose store write fails is answered with basic.nack, and the
// channel and queue go on working.
func TestEngineFailedAppendNacks(t *testing.T) {
	in := faultstore.New()
	b := startBroker(t, broker.Options{Storage: broker.StorageOptions{Shards: faultstore.WrapShards(memory.New(), in)}})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, ch, "nacked", true)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4))
	in.Fail(faultstore.On(faultstore.Append), 1, nil)
	var acks []bool
	// One at a time: publishes that reach the queue together are stored
	// in one batch, and share its fate.
	for _, body := range []string{"lost", "kept"} {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "nacked", false, false,
			amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent}))
		select {
		case c := <-confirms:
			acks = append(acks, c.Ack)
		case <-time.After(amqptest.Timeout):
			t.Fatal("no confirm")
		}
	}
	require.Equal(t, []bool{false, true}, acks)
	d := amqptest.Get(t, ch, "nacked", true)
	require.Equal(t, "kept", string(d.Body))
	amqptest.RequireEmpty(t, ch, "nacked")
}

// The engine's crash points at broker level: a broker whose stores die
// at a chosen call is closed, and a new broker on the same stores finds
// every message that was not acked, in order; those out at the crash come
// back flagged redelivered (the duplicate delivery the design allows).
func TestEngineCrashAndReopenLosesNothing(t *testing.T) {
	cases := []struct {
		name  string
		crash faultstore.Match
		// drive settles the two deliveries m-0 and m-1 so that the engine
		// reaches the crash point.
		drive       func(m0, m1 amqp091.Delivery) error
		gone        []string // acked before the crash
		redelivered []string
		// mayAlsoRedeliver follows redelivered when the engine claimed it
		// before reaching the crash point: a claimed message counts as
		// delivered, so it rightly comes back flagged.
		mayAlsoRedeliver string
		// maySurvive is an acked message whose settle may not have run
		// when the crash hit: the channel queues the ack and frees the
		// consumer's credit at once, so an actor step already past its
		// mailbox can see the credit, claim the next message and reach
		// the crash point before it reads the ack. The ack then comes
		// back, flagged, as at-least-once allows; otherwise it is gone.
		maySurvive string
	}{{
		name:  "after index write, before cursor CAS",
		crash: faultstore.On(faultstore.CompareAndSwapOffset),
		// The ack frees credit: m-2's claim writes its entry, then dies
		// at the CAS.
		drive:       func(m0, _ amqp091.Delivery) error { return m0.Ack(false) },
		gone:        []string{"m-0"},
		redelivered: []string{"m-1"},
		maySurvive:  "m-0",
	}, {
		name:  "between the two ack deletes",
		crash: faultstore.On(faultstore.IndexDelete),
		drive: func(m0, _ amqp091.Delivery) error { return m0.Ack(false) },
		gone:  []string{"m-0"},
		// The ack frees credit before the queue settles it (acks are
		// settled together at the end of a mailbox drain), so m-2 may be
		// claimed before the index delete dies.
		redelivered:      []string{"m-1"},
		mayAlsoRedeliver: "m-2",
	}, {
		name:        "during a requeue",
		crash:       faultstore.PutState(unacked.Returned),
		drive:       func(m0, _ amqp091.Delivery) error { return m0.Nack(false, true) },
		redelivered: []string{"m-0", "m-1"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			shards, mstore, index := memory.New(), metamemory.New(), unacked.NewMemoryIndex()
			in := faultstore.New()
			in.SetTracing(false)
			b1, err := broker.New(broker.Options{
				Storage: broker.StorageOptions{Shards: faultstore.WrapShards(shards, in), Meta: faultstore.WrapMeta(mstore, in), Unacked: faultstore.WrapIndex(index, in)},
			})
			require.NoError(t, err)
			_, err = b1.Listen("127.0.0.1:0")
			require.NoError(t, err)
			conn := amqptest.Dial(t, b1.URL(), amqp091.Config{})
			ch := amqptest.Channel(t, conn)
			amqptest.DeclareQueue(t, ch, "jobs", true)
			all := amqptest.Numbered("m", 8)
			amqptest.PublishConfirmed(t, ch, "jobs", true, all...)

			require.NoError(t, ch.Qos(2, 0, false))
			msgs, err := ch.Consume("jobs", "", false, false, false, false, nil)
			require.NoError(t, err)
			m0, m1 := amqptest.Next(t, msgs), amqptest.Next(t, msgs)
			crash := in.CrashAt(tc.crash)
			require.NoError(t, tc.drive(m0, m1))
			select {
			case <-crash.Fired():
			case <-time.After(amqptest.Timeout):
				t.Fatal("the crash point was never reached")
			}
			require.NoError(t, b1.Close())

			b2 := startBroker(t, broker.Options{Storage: broker.StorageOptions{Shards: shards, Meta: mstore, Unacked: index}})
			ch2 := amqptest.Channel(t, amqptest.Dial(t, b2.URL(), amqp091.Config{}))
			var bodies, flagged []string
			for {
				d, ok, err := ch2.Get("jobs", true)
				require.NoError(t, err)
				if !ok {
					break
				}
				bodies = append(bodies, string(d.Body))
				if d.Redelivered {
					flagged = append(flagged, string(d.Body))
				}
			}
			gone, redelivered := tc.gone, tc.redelivered
			if tc.maySurvive != "" && slices.Contains(bodies, tc.maySurvive) {
				gone = slices.DeleteFunc(slices.Clone(gone), func(s string) bool { return s == tc.maySurvive })
				redelivered = append([]string{tc.maySurvive}, redelivered...)
			}
			var want []string
			for _, body := range all {
				if !slices.Contains(gone, body) {
					want = append(want, body)
				}
			}
			require.Equal(t, want, bodies, "every message not acked, once, in order")
			if tc.mayAlsoRedeliver != "" && len(flagged) == len(redelivered)+1 {
				require.Equal(t, append(slices.Clone(redelivered), tc.mayAlsoRedeliver), flagged)
				return
			}
			require.Equal(t, redelivered, flagged)
		})
	}
}

// A purge of a durable queue on Pebble deletes its ready messages without
// reading them (storage.Purger), short queues with a tombstone each and
// long ones with a range deletion; an unacknowledged message stays, and
// after a restart only it comes back, followed by messages published
// after the purge.
func TestEnginePurgeAcrossRestart(t *testing.T) {
	for _, n := range []int{10, 1000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			dir := t.TempDir()
			b1 := startBroker(t, broker.Options{DataDir: dir})
			ch := amqptest.ConfirmChannel(t, amqptest.Dial(t, b1.URL(), amqp091.Config{}))
			amqptest.DeclareQueue(t, ch, "purged", true)
			amqptest.PublishConfirmed(t, ch, "purged", true, amqptest.Numbered("m", n)...)
			held := amqptest.Get(t, ch, "purged", false)
			require.Equal(t, "m-0", string(held.Body))
			got, err := ch.QueuePurge("purged", false)
			require.NoError(t, err)
			require.Equal(t, n-1, got)
			got, err = ch.QueuePurge("purged", false)
			require.NoError(t, err)
			require.Zero(t, got, "second purge")
			amqptest.PublishConfirmed(t, ch, "purged", true, "after")
			require.NoError(t, b1.Close())

			b2 := startBroker(t, broker.Options{DataDir: dir})
			ch2 := amqptest.Channel(t, amqptest.Dial(t, b2.URL(), amqp091.Config{}))
			require.Equal(t, []string{"m-0", "after"}, amqptest.GetAll(t, ch2, "purged"))
		})
	}
}
