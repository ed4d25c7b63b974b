package vhost

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/routing"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// pair is two vhosts in shared mode on one topology store, the way two
// brokers of a cluster see one vhost. Each has its own queue stores: these
// tests are about topology, not messages.
type pair struct {
	store *metamemory.Store
	a, b  *VHost
}

func newPair(t *testing.T) *pair {
	t.Helper()
	p := &pair{store: metamemory.New()}
	p.a = p.open(t, "a")
	p.b = p.open(t, "b")
	return p
}

func (p *pair) open(t *testing.T, node string) *VHost {
	t.Helper()
	stores := queue.Stores{Shards: memory.New(), Cursors: metamemory.New(), Index: unacked.NewMemoryIndex()}
	start := func(ctx context.Context, def meta.Queue, feat queue.Features) (*queue.Queue, error) {
		return queue.Start(ctx, queue.Config{
			VHost: def.VHost, Name: def.Name, Shard: def.VHost + "\x00" + def.Name,
			Stores: stores, Broker: node, Incarnation: 1, Features: feat,
		})
	}
	v, err := Open(context.Background(), Config{Name: "/", Store: p.store, StartQueue: start, Shared: true})
	require.NoError(t, err)
	t.Cleanup(v.Close)
	return v
}

func (p *pair) sync(t *testing.T, vs ...*VHost) {
	t.Helper()
	for _, v := range vs {
		require.NoError(t, v.Sync(context.Background()))
	}
}

// cancelRecorder is a consumer's receiver that records cancellations.
type cancelRecorder struct {
	mu        sync.Mutex
	cancelled []string
}

func (r *cancelRecorder) Deliver(*queue.Consumer, queue.Message) bool { return true }

func (r *cancelRecorder) Cancelled(c *queue.Consumer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancelled = append(r.cancelled, c.Tag)
}

func (r *cancelRecorder) tags() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.cancelled...)
}

func TestSyncFollowsSharedTopology(t *testing.T) {
	p := newPair(t)
	declareExchange(t, p.a, amqp.ExchangeDeclare{Exchange: "d.x", Type: "topic", Durable: true})
	declareExchange(t, p.a, amqp.ExchangeDeclare{Exchange: "t.x", Type: "fanout"})
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "shared", Durable: true})
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "local"})
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "mine", Exclusive: true})
	ctx := context.Background()
	for _, b := range []routing.Binding{
		{Source: "d.x", Destination: routing.Destination{Name: "shared"}, Key: "k.#"},
		{Source: "t.x", Destination: routing.Destination{Name: "shared"}},
		{Source: "d.x", Destination: routing.Destination{Name: "local"}, Key: "k.*"},
		{Source: "d.x", Destination: routing.Destination{Name: "t.x", Exchange: true}, Key: "e2e"},
	} {
		require.NoError(t, p.a.Bind(ctx, "c1", b))
	}
	p.sync(t, p.b)

	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"exchanges, durable or not", func(t *testing.T) {
			require.True(t, p.b.ExchangeExists("d.x"))
			require.True(t, p.b.ExchangeExists("t.x"))
		}},
		{"the durable queue", func(t *testing.T) {
			q, err := p.b.Queue("c2", "shared")
			require.NoError(t, err)
			require.True(t, q.Def.Durable)
		}},
		{"not the non-durable queue", func(t *testing.T) {
			_, err := p.b.Queue("c2", "local")
			amqptest.RequireCode(t, err, amqp.NotFound)
		}},
		{"not the exclusive queue", func(t *testing.T) {
			_, err := p.b.Queue("c1", "mine")
			amqptest.RequireCode(t, err, amqp.NotFound)
		}},
		{"bindings whose ends are here", func(t *testing.T) {
			require.Equal(t, []string{"shared"}, route(t, p.b, "d.x", "k.a.b"))
			require.Equal(t, []string{"shared"}, route(t, p.b, "d.x", "k.a"), "the binding to local is a's")
			require.Equal(t, []string{"shared"}, route(t, p.b, "d.x", "e2e"))
		}},
		{"a's own view unchanged", func(t *testing.T) {
			require.ElementsMatch(t, []string{"shared", "local"}, route(t, p.a, "d.x", "k.a"))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

func TestSyncFollowsDeletions(t *testing.T) {
	p := newPair(t)
	ctx := context.Background()
	declareExchange(t, p.a, amqp.ExchangeDeclare{Exchange: "x", Type: "direct", Durable: true})
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "q", Durable: true})
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "q2", Durable: true})
	require.NoError(t, p.a.Bind(ctx, "c1", routing.Binding{Source: "x", Destination: routing.Destination{Name: "q"}, Key: "k"}))
	p.sync(t, p.b)
	// b's own non-durable queue, bound to a's exchange.
	declareQueue(t, p.b, "c2", amqp.QueueDeclare{Queue: "b.local"})
	require.NoError(t, p.b.Bind(ctx, "c2", routing.Binding{Source: "x", Destination: routing.Destination{Name: "b.local"}, Key: "k"}))
	require.ElementsMatch(t, []string{"q", "b.local"}, route(t, p.b, "x", "k"))

	// A consumer on b of the queue a is about to delete.
	q, err := p.b.Queue("c2", "q")
	require.NoError(t, err)
	rec := &cancelRecorder{}
	require.NoError(t, q.Consume(ctx, &queue.Consumer{Tag: "ctag", Owner: queue.Owner{Connection: "c2", Channel: 1}, Receiver: rec}))
	gone := &queue.Consumer{Tag: "cancelled", Owner: queue.Owner{Connection: "c2", Channel: 1}, Receiver: rec}
	require.NoError(t, q.Consume(ctx, gone))
	_, err = q.Cancel(ctx, gone.Owner, gone.Tag)
	require.NoError(t, err)

	require.NoError(t, p.a.Unbind(ctx, "c1", routing.Binding{Source: "x", Destination: routing.Destination{Name: "q"}, Key: "k"}))
	p.sync(t, p.b)
	require.Equal(t, []string{"b.local"}, route(t, p.b, "x", "k"), "unbound on a")

	_, err = p.a.DeleteQueue(ctx, "c1", "q", false, false)
	require.NoError(t, err)
	p.sync(t, p.b)
	_, err = p.b.Queue("c2", "q")
	amqptest.RequireCode(t, err, amqp.NotFound)
	require.Equal(t, []string{"ctag"}, rec.tags(), "the consumer on b is cancelled, the cancelled one is not told again")
	<-q.Done()

	require.NoError(t, p.a.DeleteExchange(ctx, "x", false))
	p.sync(t, p.b)
	require.False(t, p.b.ExchangeExists("x"))
	bs, err := p.store.ListBindings(ctx, "/")
	require.NoError(t, err)
	require.Empty(t, bs, "b removed its own queue's binding to the deleted exchange")
	_, err = p.b.Queue("c2", "b.local")
	require.NoError(t, err, "b's own queue stays")
	_, err = p.b.Queue("c2", "q2")
	require.NoError(t, err)

	p.sync(t, p.a, p.b) // idempotent
	_, err = p.a.Queue("c1", "q2")
	require.NoError(t, err)
}

// A queue deleted and declared again elsewhere with other arguments gets a
// new actor here.
func TestSyncRestartsRedeclaredQueue(t *testing.T) {
	p := newPair(t)
	ctx := context.Background()
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "q", Durable: true})
	p.sync(t, p.b)
	old, err := p.b.Queue("c2", "q")
	require.NoError(t, err)
	_, err = p.a.DeleteQueue(ctx, "c1", "q", false, false)
	require.NoError(t, err)
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "q", Durable: true, Arguments: amqp.Table{"x-max-length": int32(5)}})
	p.sync(t, p.b)
	<-old.Done()
	q, err := p.b.Queue("c2", "q")
	require.NoError(t, err)
	require.NotSame(t, old, q)
	require.Equal(t, int32(5), q.Args["x-max-length"])
}

// Open in shared mode deletes nothing the other brokers may own.
func TestOpenSharedDeletesNothing(t *testing.T) {
	ctx := context.Background()
	st := metamemory.New()
	exchanges := []meta.Exchange{{VHost: "/", Name: "t.x", Type: "direct"}}
	queues := []meta.Queue{
		{VHost: "/", Name: "t.q"},
		{VHost: "/", Name: "ex.q", Exclusive: true, Owner: "c9"},
	}
	bindings := []meta.Binding{{VHost: "/", Source: "t.x", Destination: "t.q", DestinationKind: meta.DestinationQueue}}
	for _, e := range exchanges {
		require.NoError(t, st.PutExchange(ctx, e))
	}
	for _, q := range queues {
		require.NoError(t, st.PutQueue(ctx, q))
	}
	for _, b := range bindings {
		require.NoError(t, st.PutBinding(ctx, b))
	}
	p := &pair{store: st}
	v := p.open(t, "a")
	require.True(t, v.ExchangeExists("t.x"), "exchanges are cluster-wide")
	_, err := v.Queue("c1", "t.q")
	amqptest.RequireCode(t, err, amqp.NotFound)

	gotX, err := st.ListExchanges(ctx, "/")
	require.NoError(t, err)
	require.Equal(t, exchanges, gotX)
	gotQ, err := st.ListQueues(ctx, "/")
	require.NoError(t, err)
	require.ElementsMatch(t, queues, gotQ)
	gotB, err := st.ListBindings(ctx, "/")
	require.NoError(t, err)
	require.Equal(t, bindings, gotB)
}

// A declare of a shared queue Sync has not caught up with serves the
// stored queue: equivalent arguments succeed, others are 406.
func TestDeclareAdoptsStoredSharedQueue(t *testing.T) {
	p := newPair(t)
	ctx := context.Background()
	args := amqp.Table{"x-message-ttl": int32(1000)}
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "q", Durable: true, Arguments: args})

	_, err := p.b.DeclareQueue(ctx, "c2", &amqp.QueueDeclare{Queue: "q", Durable: true, Arguments: amqp.Table{"x-message-ttl": int32(5)}})
	amqptest.RequireCode(t, err, amqp.PreconditionFailed)
	_, err = p.b.DeclareQueue(ctx, "c2", &amqp.QueueDeclare{Queue: "q", Durable: true, Arguments: amqp.Table{"x-message-ttl": int64(1000)}})
	require.NoError(t, err)
	stored, err := p.store.GetQueue(ctx, "/", "q")
	require.NoError(t, err)
	require.Equal(t, meta.Queue{VHost: "/", Name: "q", Durable: true, Arguments: mustTable(t, args)}, stored, "a's definition stands")
	p.sync(t, p.b)
	_, err = p.b.Queue("c2", "q")
	require.NoError(t, err)
}

// Without Config.Shared, Sync does nothing.
func TestSyncNotShared(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, f.store.PutQueue(ctx, meta.Queue{VHost: "/", Name: "elsewhere", Durable: true}))
	require.NoError(t, f.v.Sync(ctx))
	_, err := f.v.Queue("c", "elsewhere")
	amqptest.RequireCode(t, err, amqp.NotFound)
}

func mustTable(t *testing.T, tb amqp.Table) []byte {
	t.Helper()
	raw, err := amqp.AppendTable(nil, tb)
	require.NoError(t, err)
	return raw
}

// Sync runs while declarations and deletions go on on both vhosts; once
// they stop, one more Sync leaves b with exactly the store's shared queues
// and its own local ones.
func TestSyncConcurrentWithChanges(t *testing.T) {
	p := newPair(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = p.b.Sync(ctx)
		}
	}()
	for i := range 50 {
		name := fmt.Sprintf("q%d", i%7)
		var err error
		if i%3 == 2 {
			_, err = p.a.DeleteQueue(ctx, "c1", name, false, false)
		} else {
			_, err = p.a.DeclareQueue(ctx, "c1", &amqp.QueueDeclare{Queue: name, Durable: true})
		}
		require.NoError(t, err)
		_, err = p.b.DeclareQueue(ctx, "c2", &amqp.QueueDeclare{Queue: fmt.Sprintf("b.local%d", i)})
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
	p.sync(t, p.b)

	stored, err := p.store.ListQueues(ctx, "/")
	require.NoError(t, err)
	var want, got []string
	for _, q := range stored {
		want = append(want, q.Name) // a's durable ones and b's local ones
	}
	for _, q := range p.b.Queues() {
		got = append(got, q.Def.Name)
	}
	require.ElementsMatch(t, want, got)
}

// A passive declare finds what another broker declared before Sync caught
// up with it, but not that broker's own queues.
func TestPassiveDeclareAdopts(t *testing.T) {
	p := newPair(t)
	ctx := context.Background()
	declareExchange(t, p.a, amqp.ExchangeDeclare{Exchange: "x", Type: "topic"})
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "shared", Durable: true})
	declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "local"})
	tests := []struct {
		name string
		call func() error
		code uint16 // 0: found
	}{
		{"shared queue", func() error {
			_, err := p.b.DeclareQueue(ctx, "c2", &amqp.QueueDeclare{Queue: "shared", Passive: true})
			return err
		}, 0},
		{"exchange", func() error {
			return p.b.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: "x", Passive: true})
		}, 0},
		{"a's own queue", func() error {
			_, err := p.b.DeclareQueue(ctx, "c2", &amqp.QueueDeclare{Queue: "local", Passive: true})
			return err
		}, amqp.NotFound},
		{"a missing queue", func() error {
			_, err := p.b.DeclareQueue(ctx, "c2", &amqp.QueueDeclare{Queue: "nope", Passive: true})
			return err
		}, amqp.NotFound},
		{"a missing exchange", func() error {
			return p.b.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: "nope", Passive: true})
		}, amqp.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.code == 0 {
				require.NoError(t, err)
				return
			}
			amqptest.RequireCode(t, err, tc.code)
		})
	}
	require.Equal(t, []string{"shared"}, route(t, p.b, "", "shared"))
	p.sync(t, p.b)
	require.True(t, p.b.ExchangeExists("x"))
}

// Lookups, bindings and deletions on one broker find a shared queue or an
// exchange declared on another before Sync caught up with them.
func TestLookupsAdopt(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		do   func(t *testing.T, p *pair)
	}{
		{"Queue (consume, get, purge)", func(t *testing.T, p *pair) {
			q, err := p.b.Queue("c2", "q")
			require.NoError(t, err)
			require.Equal(t, "q", q.Def.Name)
		}},
		{"Bind", func(t *testing.T, p *pair) {
			require.NoError(t, p.b.Bind(ctx, "c2", routing.Binding{Source: "x", Destination: routing.Destination{Name: "q"}, Key: "k"}))
			require.Equal(t, []string{"q"}, route(t, p.b, "x", "k"))
			p.sync(t, p.a)
			require.Equal(t, []string{"q"}, route(t, p.a, "x", "k"))
		}},
		{"DeleteQueue deletes it for everyone", func(t *testing.T, p *pair) {
			_, err := p.b.DeleteQueue(ctx, "c2", "q", false, false)
			require.NoError(t, err)
			_, err = p.store.GetQueue(ctx, "/", "q")
			require.ErrorIs(t, err, meta.ErrNotFound)
			p.sync(t, p.a)
			_, err = p.a.Queue("c1", "q")
			amqptest.RequireCode(t, err, amqp.NotFound)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			declareExchange(t, p.a, amqp.ExchangeDeclare{Exchange: "x", Type: "direct", Durable: true})
			declareQueue(t, p.a, "c1", amqp.QueueDeclare{Queue: "q", Durable: true})
			tc.do(t, p)
		})
	}
}
