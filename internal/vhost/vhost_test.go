package vhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/routing"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// fixture is one vhost over in-memory stores. Queues share one set of
// stores, as durable queues share the broker's persistent ones, so a queue
// deleted and declared again under the same name meets its old shard.
type fixture struct {
	store  *faultyTopology
	stores queue.Stores
	v      *VHost
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		store: &faultyTopology{Store: metamemory.New()},
		stores: queue.Stores{
			Shards:  memory.New(),
			Cursors: metamemory.New(),
			Index:   unacked.NewMemoryIndex(),
		},
	}
	f.open(t)
	return f
}

// open opens (or reopens, after Close) the vhost on the fixture's stores.
func (f *fixture) open(t *testing.T) {
	t.Helper()
	v, err := Open(context.Background(), Config{Name: "/", Store: f.store, StartQueue: f.startQueue})
	require.NoError(t, err)
	f.v = v
	t.Cleanup(v.Close)
}

func (f *fixture) startQueue(ctx context.Context, def meta.Queue, feat queue.Features) (*queue.Queue, error) {
	return queue.Start(ctx, queue.Config{
		VHost: def.VHost, Name: def.Name, Shard: def.VHost + "\x00" + def.Name,
		Stores: f.stores, Broker: "test", Incarnation: 1, Features: feat,
	})
}

// faultyTopology fails the Put methods while fail is set.
type faultyTopology struct {
	*metamemory.Store
	fail atomic.Bool
}

var errInjected = errors.New("injected store failure")

func (s *faultyTopology) PutExchange(ctx context.Context, e meta.Exchange) error {
	if s.fail.Load() {
		return errInjected
	}
	return s.Store.PutExchange(ctx, e)
}

func (s *faultyTopology) PutQueue(ctx context.Context, q meta.Queue) error {
	if s.fail.Load() {
		return errInjected
	}
	return s.Store.PutQueue(ctx, q)
}

func (s *faultyTopology) PutBinding(ctx context.Context, b meta.Binding) error {
	if s.fail.Load() {
		return errInjected
	}
	return s.Store.PutBinding(ctx, b)
}

func declareQueue(t *testing.T, v *VHost, conn string, m amqp.QueueDeclare) *Queue {
	t.Helper()
	q, err := v.DeclareQueue(context.Background(), conn, &m)
	require.NoError(t, err)
	return q
}

func declareExchange(t *testing.T, v *VHost, m amqp.ExchangeDeclare) {
	t.Helper()
	require.NoError(t, v.DeclareExchange(context.Background(), &m))
}

func route(t *testing.T, v *VHost, exchange, key string) []string {
	t.Helper()
	names, _, err := v.Route(exchange, key, nil, nil, nil)
	require.NoError(t, err)
	return names
}

func TestSameArg(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	cases := []struct {
		name string
		a, b any
		same bool
	}{
		{"integers of any width by value", int8(10), int64(10), true},
		{"unsigned and signed", uint16(10), int32(10), true},
		{"different integers", int32(10), int32(11), false},
		{"floats by value", float32(1.5), float64(1.5), true},
		{"an integer is not a float", int32(1), float64(1), false},
		{"strings", "a", "a", true},
		{"a string is not a byte array", "a", []byte("a"), false},
		{"byte arrays", []byte("a"), []byte("a"), true},
		{"different byte arrays", []byte("a"), []byte("b"), false},
		{"tables", amqp.Table{"k": int32(1)}, amqp.Table{"k": int32(1)}, true},
		{"different tables", amqp.Table{"k": int32(1)}, amqp.Table{"k": int32(2)}, false},
		{"arrays", []any{"a", int32(1)}, []any{"a", int32(1)}, true},
		{"different arrays", []any{"a"}, []any{"b"}, false},
		{"timestamps", ts, ts.UTC(), true},
		{"voids", nil, nil, true},
		{"void and false", nil, false, false},
		{"booleans", true, true, true},
		{"decimals", amqp.Decimal{Scale: 2, Value: 5}, amqp.Decimal{Scale: 2, Value: 5}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.same, sameArg(tc.a, tc.b))
			require.Equal(t, tc.same, sameArg(tc.b, tc.a))
		})
	}
}

// TestRedeclareWithUncomparableArguments: comparing argument values with ==
// panicked (and took the broker down) for byte arrays, tables and arrays.
// A byte-array alternate-exchange is refused on creation now, but one can
// still come from the store (written before that rule).
func TestRedeclareWithUncomparableArguments(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	args := amqp.Table{"alternate-exchange": []byte("ae")}
	raw, err := amqp.AppendTable(nil, args)
	require.NoError(t, err)
	require.NoError(t, f.store.PutExchange(ctx, meta.Exchange{VHost: "/", Name: "x", Type: "direct", Durable: true, Arguments: raw}))
	f.v.Close()
	f.open(t)

	require.NoError(t, f.v.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: "x", Type: "direct", Durable: true, Arguments: args}))
	err = f.v.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: "x", Type: "direct", Durable: true,
		Arguments: amqp.Table{"alternate-exchange": []byte("other")}})
	amqptest.RequireCode(t, err, amqp.PreconditionFailed)

	// ParseArgs refuses such arguments at declare (406); a store written
	// before it may still hold them, and redeclaring must not panic.
	qargs := amqp.Table{"x-dead-letter-routing-key": []byte("k"), "x-queue-type": amqp.Table{"nested": []any{int32(1)}}}
	_, err = f.v.DeclareQueue(ctx, "c", &amqp.QueueDeclare{Queue: "q", Arguments: qargs})
	amqptest.RequireCode(t, err, amqp.PreconditionFailed)
	raw, err = amqp.AppendTable(nil, qargs)
	require.NoError(t, err)
	require.NoError(t, f.store.PutQueue(ctx, meta.Queue{VHost: "/", Name: "q", Durable: true, Arguments: raw}))
	f.v.Close()
	f.open(t)
	declareQueue(t, f.v, "c", amqp.QueueDeclare{Queue: "q", Durable: true, Arguments: qargs})
	_, err = f.v.DeclareQueue(ctx, "c", &amqp.QueueDeclare{Queue: "q", Durable: true,
		Arguments: amqp.Table{"x-dead-letter-routing-key": []byte("k"), "x-queue-type": amqp.Table{"nested": []any{int32(2)}}}})
	amqptest.RequireCode(t, err, amqp.PreconditionFailed)
}

// TestOpenKeepsOnlyDurableTopology writes what a previous run may have left
// in the store, including what a crash leaves (an exclusive queue, a
// binding whose queue is gone), and opens the vhost on it.
func TestOpenKeepsOnlyDurableTopology(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.v.Close()
	st := f.store
	for _, e := range []meta.Exchange{
		{VHost: "/", Name: "d.x", Type: "topic", Durable: true},
		{VHost: "/", Name: "t.x", Type: "direct"},
	} {
		require.NoError(t, st.PutExchange(ctx, e))
	}
	for _, q := range []meta.Queue{
		{VHost: "/", Name: "d.q", Durable: true},
		{VHost: "/", Name: "t.q"},
		{VHost: "/", Name: "x.q", Durable: true, Exclusive: true, Owner: "gone"},
	} {
		require.NoError(t, st.PutQueue(ctx, q))
	}
	durable := meta.Binding{VHost: "/", Source: "d.x", Destination: "d.q", DestinationKind: meta.DestinationQueue, RoutingKey: "a.*", Durable: true}
	for _, b := range []meta.Binding{
		durable,
		{VHost: "/", Source: "t.x", Destination: "d.q", DestinationKind: meta.DestinationQueue, RoutingKey: "k"},
		{VHost: "/", Source: "d.x", Destination: "x.q", DestinationKind: meta.DestinationQueue, RoutingKey: "a.*", Durable: true},
		{VHost: "/", Source: "d.x", Destination: "missing", DestinationKind: meta.DestinationQueue, RoutingKey: "a.*", Durable: true},
	} {
		require.NoError(t, st.PutBinding(ctx, b))
	}
	f.open(t)

	xs, err := st.ListExchanges(ctx, "/")
	require.NoError(t, err)
	require.Len(t, xs, 1)
	require.Equal(t, "d.x", xs[0].Name)
	qs, err := st.ListQueues(ctx, "/")
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Equal(t, "d.q", qs[0].Name)
	bs, err := st.ListBindings(ctx, "/")
	require.NoError(t, err)
	require.Equal(t, []meta.Binding{durable}, bs)

	require.Equal(t, []string{"d.q"}, route(t, f.v, "d.x", "a.b"))
	require.True(t, f.v.ExchangeExists("d.x"))
	require.False(t, f.v.ExchangeExists("t.x"))
	_, err = f.v.Queue("c", "x.q")
	amqptest.RequireCode(t, err, amqp.NotFound)
}

func TestBindingDurability(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	declareExchange(t, f.v, amqp.ExchangeDeclare{Exchange: "d.x", Type: "direct", Durable: true})
	declareExchange(t, f.v, amqp.ExchangeDeclare{Exchange: "t.x", Type: "direct"})
	declareQueue(t, f.v, "c", amqp.QueueDeclare{Queue: "d.q", Durable: true})
	declareQueue(t, f.v, "c", amqp.QueueDeclare{Queue: "t.q"})
	declareQueue(t, f.v, "c", amqp.QueueDeclare{Queue: "x.q", Durable: true, Exclusive: true})

	cases := []struct {
		src, dst string
		toX      bool
		durable  bool
	}{
		{"d.x", "d.q", false, true},
		{"amq.topic", "d.q", false, true},
		{"d.x", "amq.fanout", true, true},
		{"d.x", "t.q", false, false},
		{"t.x", "d.q", false, false},
		{"d.x", "t.x", true, false},
		{"d.x", "x.q", false, false},
	}
	for _, tc := range cases {
		require.NoError(t, f.v.Bind(ctx, "c", routing.Binding{Source: tc.src, Destination: routing.Destination{Name: tc.dst, Exchange: tc.toX}, Key: "k"}))
	}
	bs, err := f.store.ListBindings(ctx, "/")
	require.NoError(t, err)
	durable := make(map[string]bool)
	for _, b := range bs {
		durable[b.Source+">"+b.Destination] = b.Durable
	}
	for _, tc := range cases {
		require.Equal(t, tc.durable, durable[tc.src+">"+tc.dst], "%s > %s", tc.src, tc.dst)
	}
}

// TestStoreFailureChangesNothing: when the store refuses a declaration the
// client gets 541 and the vhost is as before.
func TestStoreFailureChangesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	declareQueue(t, f.v, "c", amqp.QueueDeclare{Queue: "q"})
	f.store.fail.Store(true)

	err := f.v.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: "x", Type: "direct"})
	amqptest.RequireCode(t, err, amqp.InternalError)
	require.False(t, f.v.ExchangeExists("x"))

	_, err = f.v.DeclareQueue(ctx, "c", &amqp.QueueDeclare{Queue: "q2"})
	amqptest.RequireCode(t, err, amqp.InternalError)
	_, err = f.v.Queue("c", "q2")
	amqptest.RequireCode(t, err, amqp.NotFound)

	err = f.v.Bind(ctx, "c", routing.Binding{Source: "amq.direct", Destination: routing.Destination{Name: "q"}, Key: "k"})
	amqptest.RequireCode(t, err, amqp.InternalError)
	require.Empty(t, route(t, f.v, "amq.direct", "k"))

	f.store.fail.Store(false)
	require.NoError(t, f.v.Bind(ctx, "c", routing.Binding{Source: "amq.direct", Destination: routing.Destination{Name: "q"}, Key: "k"}))
	require.Equal(t, []string{"q"}, route(t, f.v, "amq.direct", "k"))
}

func TestConnectionClosedDeletesOnlyItsExclusiveQueues(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	declareQueue(t, f.v, "a", amqp.QueueDeclare{Queue: "a.excl", Exclusive: true})
	declareQueue(t, f.v, "a", amqp.QueueDeclare{Queue: "a.shared"})
	declareQueue(t, f.v, "b", amqp.QueueDeclare{Queue: "b.excl", Exclusive: true})
	require.NoError(t, f.v.Bind(ctx, "a", routing.Binding{Source: "amq.fanout", Destination: routing.Destination{Name: "a.excl"}}))

	f.v.ConnectionClosed(ctx, "a")
	_, err := f.v.Queue("a", "a.excl")
	amqptest.RequireCode(t, err, amqp.NotFound)
	_, err = f.v.Queue("a", "a.shared")
	require.NoError(t, err)
	_, err = f.v.Queue("b", "b.excl")
	require.NoError(t, err)
	require.Empty(t, route(t, f.v, "amq.fanout", ""))
	bs, err := f.store.ListBindings(ctx, "/")
	require.NoError(t, err)
	require.Empty(t, bs)
}

// TestDeleteAndRedeclareRace deletes and redeclares one durable queue name
// from many goroutines. Whatever the interleaving, the store and the vhost
// must agree at the end: every round ends with a declaration, so the queue
// is served and stored. (A deletion that finished its store work after a
// concurrent redeclaration used to delete the new queue's metadata.)
func TestDeleteAndRedeclareRace(t *testing.T) {
	ctx := context.Background()
	for attempt := range 20 {
		f := newFixture(t)
		const workers, rounds = 4, 20
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					if _, err := f.v.DeleteQueue(ctx, "c", "contended", false, false); err != nil {
						t.Errorf("delete: %v", err)
						return
					}
					m := amqp.QueueDeclare{Queue: "contended", Durable: true}
					q, err := f.v.DeclareQueue(ctx, "c", &m)
					if err != nil {
						t.Errorf("declare: %v", err)
						return
					}
					if err := q.Publish(storage.Record{Body: []byte(fmt.Sprint(w, i))}, queue.NoTTL, nil, 0); err != nil && !errors.Is(err, queue.ErrDeleted) {
						t.Errorf("publish: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		q, err := f.v.Queue("c", "contended")
		require.NoError(t, err, "attempt %d", attempt)
		_, err = f.store.GetQueue(ctx, "/", "contended")
		require.NoError(t, err, "attempt %d: the vhost serves the queue, the store lost it", attempt)
		require.NotNil(t, q)
		f.v.Close()
	}
}

// TestRouteDuringTopologyChanges runs declarations, bindings and deletions
// against concurrent routing; under -race it checks the locking contract.
func TestRouteDuringTopologyChanges(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	declareExchange(t, f.v, amqp.ExchangeDeclare{Exchange: "x", Type: "topic"})
	stop := make(chan struct{})
	var routers sync.WaitGroup
	for range 4 {
		routers.Go(func() {
			var names []string
			var dst []*Queue
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				names, dst, err = f.v.Route("x", "a.b", nil, names, dst[:0])
				if err != nil {
					t.Errorf("route: %v", err)
					return
				}
			}
		})
	}
	for i := range 100 {
		name := fmt.Sprintf("q%d", i%10)
		declareQueue(t, f.v, "c", amqp.QueueDeclare{Queue: name})
		require.NoError(t, f.v.Bind(ctx, "c", routing.Binding{Source: "x", Destination: routing.Destination{Name: name}, Key: "a.*"}))
		if i%3 == 0 {
			_, err := f.v.DeleteQueue(ctx, "c", name, false, false)
			require.NoError(t, err)
		}
	}
	close(stop)
	routers.Wait()
}
