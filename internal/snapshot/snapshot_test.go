package snapshot

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/routing"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// fixture is vhost "/" on in-memory stores with exchange "x", queues "b"
// (two messages) and "a" (a stream, one message), "b" bound to "x", and a
// Reader over it.
func fixture(t *testing.T) (Reader, *vhost.VHost) {
	t.Helper()
	ctx := context.Background()
	st := queue.Stores{Shards: memory.New(), Cursors: metamemory.New(), Index: unacked.NewMemoryIndex()}
	vh, err := vhost.Open(ctx, vhost.Config{
		Name:  "/",
		Store: metamemory.New(),
		StartQueue: func(ctx context.Context, def meta.Queue, f queue.Features) (*queue.Queue, error) {
			return queue.Start(ctx, queue.Config{VHost: def.VHost, Name: def.Name, Shard: def.Name, Stores: st, Broker: "test", Incarnation: 1, Features: f})
		},
	})
	require.NoError(t, err)
	t.Cleanup(vh.Close)
	require.NoError(t, vh.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: "x", Type: "fanout", Durable: true, Arguments: amqp.Table{"k": "v"}}))
	qb, err := vh.DeclareQueue(ctx, "c1", &amqp.QueueDeclare{Queue: "b", Durable: true})
	require.NoError(t, err)
	qa, err := vh.DeclareQueue(ctx, "c1", &amqp.QueueDeclare{Queue: "a", Durable: true, Arguments: amqp.Table{"x-queue-type": "stream"}})
	require.NoError(t, err)
	require.NoError(t, vh.Bind(ctx, "c1", routing.Binding{Source: "x", Destination: routing.Destination{Name: "b"}, Key: "k"}))
	for _, body := range []string{"m1", "m2"} {
		require.NoError(t, qb.Publish(storage.Record{Body: []byte(body)}, queue.NoTTL, nil, 0))
	}
	require.NoError(t, qa.Publish(storage.Record{Body: []byte("s1")}, queue.NoTTL, nil, 0))
	for _, q := range []*vhost.Queue{qa, qb} {
		_, err := q.Stats(ctx) // after the publishes
		require.NoError(t, err)
	}
	r := Reader{
		LookupVHost: func(name string) (*vhost.VHost, bool) {
			if name == "" || name == "/" {
				return vh, true
			}
			return nil, false
		},
		Conns: func() []*session.Conn { return nil },
	}
	return r, vh
}

func TestReaderNames(t *testing.T) {
	r, _ := fixture(t)
	for _, tc := range []struct {
		name   string
		vhost  string
		canon  string
		ok     bool
		queues []string
	}{
		{"the vhost", "/", "/", true, []string{"a", "b"}},
		{`"" is "/"`, "", "/", true, []string{"a", "b"}},
		{"no such vhost", "nope", "", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			canon, ok := r.VHost(tc.vhost)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.canon, canon)
			require.Equal(t, tc.queues, r.QueueNames(tc.vhost))
			require.Equal(t, tc.ok, r.HasQueue(tc.vhost, "b"))
			require.False(t, r.HasQueue(tc.vhost, "missing"))
		})
	}
}

func TestReaderExchanges(t *testing.T) {
	r, _ := fixture(t)
	var names []string
	for _, x := range r.Exchanges("/") {
		names = append(names, x.Name)
	}
	require.Contains(t, names, "", "the default exchange is listed")
	require.Contains(t, names, "x")
	require.IsIncreasing(t, names)
	x, ok := r.Exchange("/", "x")
	require.True(t, ok)
	require.Equal(t, definitions.Exchange{Name: "x", VHost: "/", Type: "fanout", Durable: true, Arguments: definitions.TableJSON(amqp.Table{"k": "v"})}, x)
	_, ok = r.Exchange("/", "missing")
	require.False(t, ok)
	_, ok = r.Exchange("nope", "x")
	require.False(t, ok)
	require.Nil(t, r.Exchanges("nope"))
	bs := r.Bindings("/")
	require.Len(t, bs, 1)
	require.Equal(t, routing.Destination{Name: "b"}, bs[0].Destination)
	require.Nil(t, r.Bindings("nope"))
}

// TestReaderQueues: a listing and one queue's view carry the counts, and
// a stream's view its log; a missing queue is not found.
func TestReaderQueues(t *testing.T) {
	ctx := context.Background()
	r, _ := fixture(t)
	qs := r.Queues(ctx, "/")
	require.Len(t, qs, 2)
	require.Equal(t, "a", qs[0].Name)
	require.NotNil(t, qs[0].Stream, "a stream shows its log")
	require.EqualValues(t, 1, qs[0].Stream.NextOffset-qs[0].Stream.FirstOffset)
	b := qs[1]
	require.Equal(t, "b", b.Name)
	require.True(t, b.Durable)
	require.EqualValues(t, 2, b.Ready)
	require.EqualValues(t, 2, b.Counters.Enqueued)
	require.Nil(t, b.Stream)
	one, ok := r.Queue(ctx, "/", "b")
	require.True(t, ok)
	require.Equal(t, b.Ready, one.Ready)
	_, ok = r.Queue(ctx, "/", "missing")
	require.False(t, ok)
	require.Nil(t, r.Queues(ctx, "nope"))
}

// TestUsage: exact counts ask the actor; sampled ones are what an idle
// queue published, and agree with them once it is idle.
func TestUsage(t *testing.T) {
	ctx := context.Background()
	_, vh := fixture(t)
	q, ok := vh.LookupQueue("b")
	require.True(t, ok)
	exact, ok := Usage(ctx, q, true)
	require.True(t, ok)
	require.EqualValues(t, 2, exact.Ready)
	require.Eventually(t, func() bool {
		u, ok := Usage(ctx, q, false)
		return ok && u.Ready == 2
	}, 5*time.Second, time.Millisecond)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, ok = Usage(gone, q, true)
	require.False(t, ok, "an ended context gets no exact answer")
}

func TestCounters(t *testing.T) {
	got := Counters(queue.CounterValues{Publish: 1, Deliver: 2, DeliverNoAck: 3, Get: 4, GetNoAck: 5, Redeliver: 6, Ack: 7, DeadLettered: 8})
	require.Equal(t, uint64(1), got.Enqueued)
	require.Equal(t, uint64(2), got.Delivered)
	require.Equal(t, uint64(3), got.DeliveredNoAck)
	require.Equal(t, uint64(4), got.Got)
	require.Equal(t, uint64(5), got.GotNoAck)
	require.Equal(t, uint64(6), got.Redelivered)
	require.Equal(t, uint64(7), got.Acked)
	require.Equal(t, uint64(8), got.DeadLettered)
}

func TestConnectionsNone(t *testing.T) {
	r, _ := fixture(t)
	require.Empty(t, r.Connections())
	r.CloseConnection("missing", 320, "gone") // nothing to close: no panic
}
