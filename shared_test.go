package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/peer"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/sharedtest"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// sharedPair is two brokers on one sharedtest store, the way two nodes of
// a cluster share the replicated stores. n1 is not the meta leader (its
// scanner never runs), n2 is; its peers.Alive reports n1 dead once dead is set.
type sharedPair struct {
	s      *sharedtest.Stores
	b1, b2 *Broker
	dead   atomic.Bool
}

// notLeader is the shared meta store as a follower node sees it.
type notLeader struct{ *sharedtest.Meta }

func (notLeader) IsLeader() bool { return false }

func newSharedPair(t *testing.T) *sharedPair {
	t.Helper()
	p := &sharedPair{s: sharedtest.New()}
	p.b1 = startBroker(t, Options{Storage: StorageOptions{Meta: notLeader{p.s.Meta}, Shards: p.s.Shards, Unacked: p.s.Index}, Node: "n1"})
	p.b2 = startBroker(t, Options{Storage: StorageOptions{Meta: p.s.Meta, Shards: p.s.Shards, Unacked: p.s.Index}, Node: "n2",
		peers: peer.Peers{Alive: func(node string) bool { return node != "n1" || !p.dead.Load() }}})
	return p
}

// sharedChannel dials b and opens a channel; both close on cleanup.
func sharedChannel(t *testing.T, b *Broker) *amqp091.Channel {
	t.Helper()
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	return amqptest.Channel(t, conn)
}

// waitQueue waits until b runs queue name (or, with present false, no
// longer does).
func waitQueue(t *testing.T, b *Broker, name string, present bool) {
	t.Helper()
	amqptest.Poll(t, func() bool {
		vh, ok := b.lookupVHost("/")
		if !ok {
			return false
		}
		_, ok = vh.LookupQueue(name)
		return ok == present
	}, "queue %s present=%v on %s", name, present, b.nodeID)
}

// collect receives n deliveries from msgs, acking each.
func collect(t *testing.T, msgs <-chan amqp091.Delivery, n int) []amqp091.Delivery {
	t.Helper()
	out := make([]amqp091.Delivery, 0, n)
	for range n {
		d := amqptest.Next(t, msgs)
		require.NoError(t, d.Ack(false))
		out = append(out, d)
	}
	return out
}

// A durable queue and its exchange declared on one broker are served by
// the other: publish on 1, consume on 2, every message once; deleting it
// on 2 cancels the consumer on 1.
func TestSharedQueueAcrossBrokers(t *testing.T) {
	amqptest.CheckGoroutines(t) // the followers stop with their brokers
	p := newSharedPair(t)
	ch1, ch2 := sharedChannel(t, p.b1), sharedChannel(t, p.b2)
	require.NoError(t, ch1.ExchangeDeclare("jobs.x", "direct", true, false, false, false, nil))
	amqptest.DeclareQueue(t, ch1, "jobs", true)
	require.NoError(t, ch1.QueueBind("jobs", "k", "jobs.x", false, nil))

	waitQueue(t, p.b2, "jobs", true)
	_, err := ch2.QueueDeclarePassive("jobs", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch2.ExchangeDeclarePassive("jobs.x", "direct", true, false, false, false, nil))

	const n = 200
	bodies := amqptest.Numbered("m", n)
	require.NoError(t, ch1.Confirm(false))
	confirms := ch1.NotifyPublish(make(chan amqp091.Confirmation, n))
	for _, body := range bodies {
		require.NoError(t, ch1.PublishWithContext(context.Background(), "jobs.x", "k", false, false,
			amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent}))
	}
	for range n {
		require.True(t, (<-confirms).Ack)
	}
	msgs, err := ch2.Consume("jobs", "on-2", false, false, false, false, nil)
	require.NoError(t, err)
	got := collect(t, msgs, n)
	for i, d := range got {
		require.Equal(t, bodies[i], string(d.Body), "in order, once")
		require.False(t, d.Redelivered)
	}
	require.NoError(t, ch2.Cancel("on-2", false))
	amqptest.RequireEmpty(t, ch1, "jobs")
	amqptest.RequireEmpty(t, ch2, "jobs")

	// The binding made on 1 routes on 2.
	publishTo := func(ch *amqp091.Channel, body string) {
		require.NoError(t, ch.PublishWithContext(context.Background(), "jobs.x", "k", false, false,
			amqp091.Publishing{Body: []byte(body)}))
	}
	publishTo(ch2, "via-2")
	amqptest.Poll(t, func() bool {
		d, ok, err := ch1.Get("jobs", true)
		require.NoError(t, err)
		if ok {
			require.Equal(t, "via-2", string(d.Body))
		}
		return ok
	}, "the publish on 2 reaches 1")

	cancels := ch1.NotifyCancel(make(chan string, 1))
	_, err = ch1.Consume("jobs", "on-1", false, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch2.QueueDelete("jobs", false, false, false)
	require.NoError(t, err)
	select {
	case tag := <-cancels:
		require.Equal(t, "on-1", tag)
	case <-time.After(amqptest.Timeout):
		t.Fatal("no basic.cancel on broker 1")
	}
	waitQueue(t, p.b1, "jobs", false)
	_, err = ch1.QueueDeclarePassive("jobs", true, false, false, false, nil)
	amqptest.RequireCode(t, err, 404)
}

// Consumers on both brokers, messages published on both: each message is
// delivered exactly once overall.
func TestSharedConsumersOnBothBrokers(t *testing.T) {
	p := newSharedPair(t)
	pub1, pub2 := sharedChannel(t, p.b1), sharedChannel(t, p.b2)
	amqptest.DeclareQueue(t, pub1, "work", true)
	waitQueue(t, p.b2, "work", true)
	con1, con2 := sharedChannel(t, p.b1), sharedChannel(t, p.b2)
	msgs1, err := con1.Consume("work", "c1", false, false, false, false, nil)
	require.NoError(t, err)
	msgs2, err := con2.Consume("work", "c2", false, false, false, false, nil)
	require.NoError(t, err)

	const perBroker = 500
	amqptest.PublishConfirmed(t, pub1, "work", false, amqptest.Numbered("one", perBroker)...)
	amqptest.PublishConfirmed(t, pub2, "work", true, amqptest.Numbered("two", perBroker)...)

	seen := make(map[string]int, 2*perBroker)
	byBroker := [2]int{}
	for total := 0; total < 2*perBroker; total++ {
		var d amqp091.Delivery
		select {
		case d = <-msgs1:
			byBroker[0]++
		case d = <-msgs2:
			byBroker[1]++
		case <-time.After(amqptest.Timeout):
			t.Fatalf("only %d of %d delivered", total, 2*perBroker)
		}
		require.NoError(t, d.Ack(false))
		seen[string(d.Body)]++
	}
	for _, body := range append(amqptest.Numbered("one", perBroker), amqptest.Numbered("two", perBroker)...) {
		require.Equal(t, 1, seen[body], "body %s", body)
	}
	t.Logf("delivered by broker 1: %d, by broker 2: %d", byBroker[0], byBroker[1])
	require.NoError(t, con1.Cancel("c1", false))
	require.NoError(t, con2.Cancel("c2", false))
	amqptest.RequireEmpty(t, pub1, "work")
	amqptest.RequireEmpty(t, pub2, "work")
}

// A message nacked with requeue on broker 1, which has no consumer, is
// redelivered by broker 2's consumer.
func TestSharedRequeueServedElsewhere(t *testing.T) {
	p := newSharedPair(t)
	ch1, ch2 := sharedChannel(t, p.b1), sharedChannel(t, p.b2)
	amqptest.DeclareQueue(t, ch1, "retry", true)
	waitQueue(t, p.b2, "retry", true)
	amqptest.PublishConfirmed(t, ch1, "retry", true, "once-more")
	d := amqptest.Get(t, ch1, "retry", false)
	require.False(t, d.Redelivered)

	msgs, err := ch2.Consume("retry", "", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, d.Nack(false, true))
	again := amqptest.Next(t, msgs)
	require.Equal(t, "once-more", string(again.Body))
	require.True(t, again.Redelivered)
	require.NoError(t, again.Ack(false))
}

// A broker that dies holding deliveries: the leader's scanner returns them
// once its peers.Alive says it is dead, and a consumer on the leader gets them,
// redelivered. (Close would requeue what its connections hold, so the
// deliveries are held for a connection that does not exist, as after a
// crash nobody settles them.)
func TestSharedDeadBrokersDeliveriesReturn(t *testing.T) {
	p := newSharedPair(t)
	ctx := context.Background()
	ch1, ch2 := sharedChannel(t, p.b1), sharedChannel(t, p.b2)
	amqptest.DeclareQueue(t, ch1, "orphans", true)
	waitQueue(t, p.b2, "orphans", true)
	amqptest.PublishConfirmed(t, ch1, "orphans", true, "a", "b")
	vh, _ := p.b1.lookupVHost("/")
	q, err := vh.Queue("", "orphans")
	require.NoError(t, err)
	for _, want := range []string{"a", "b"} {
		m, _, ok, err := q.Get(ctx, queue.Owner{Connection: "crashed#1", Channel: 1}, false)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want, string(m.Body))
	}
	held := func() []unacked.Entry {
		var es []unacked.Entry
		require.NoError(t, p.s.Index.Queue(ctx, "/", "orphans", func(e unacked.Entry) bool {
			es = append(es, e)
			return true
		}))
		return es
	}
	require.NoError(t, p.b2.scan.Pass(ctx))
	for _, e := range held() {
		require.Equal(t, unacked.Delivered, e.State, "a live peer's deliveries are left alone")
		require.Equal(t, "n1", e.Broker)
	}

	require.NoError(t, p.b1.Close())
	p.dead.Store(true)
	require.NoError(t, p.b2.scan.Pass(ctx))
	msgs, err := ch2.Consume("orphans", "", false, false, false, false, nil)
	require.NoError(t, err)
	got := collect(t, msgs, 2)
	for i, want := range []string{"a", "b"} {
		require.Equal(t, want, string(got[i].Body))
		require.True(t, got[i].Redelivered)
	}
	amqptest.RequireEmpty(t, ch2, "orphans")
}

// Non-durable queues stay on the broker that declared them.
func TestSharedNonDurableQueueStaysLocal(t *testing.T) {
	p := newSharedPair(t)
	ch1, ch2 := sharedChannel(t, p.b1), sharedChannel(t, p.b2)
	amqptest.DeclareQueue(t, ch1, "local", false)
	amqptest.DeclareQueue(t, ch1, "marker", true) // declared after: once it is on 2, 2 has seen local
	waitQueue(t, p.b2, "marker", true)
	_, err := ch2.QueueDeclarePassive("local", false, false, false, false, nil)
	amqptest.RequireCode(t, err, 404)
	amqptest.PublishConfirmed(t, ch1, "local", false, "here")
	require.Equal(t, "here", string(amqptest.Get(t, ch1, "local", true).Body))
}

// Vhosts created and deleted on one broker follow on the other; a deleted
// vhost's connections there are closed with 320.
func TestSharedVHostsFollow(t *testing.T) {
	p := newSharedPair(t)
	ctx := context.Background()
	_, err := p.b1.Admin().PutVHost(ctx, VHost{Name: "team"})
	require.NoError(t, err)
	amqptest.Poll(t, func() bool { _, ok := p.b2.lookupVHost("team"); return ok }, "vhost team on broker 2")
	require.NoError(t, p.b2.Admin().PutPermission(ctx, fullPermissionOn("guest", "team")))
	conn := amqptest.Dial(t, p.b2.URL()+"team", amqp091.Config{})
	errs := conn.NotifyClose(make(chan *amqp091.Error, 1))
	amqptest.RequireWorks(t, conn)

	require.NoError(t, p.b1.Admin().DeleteVHost(ctx, "team"))
	e := amqptest.AwaitClose(t, errs)
	require.Equal(t, 320, e.Code)
	amqptest.Poll(t, func() bool { _, ok := p.b2.lookupVHost("team"); return !ok }, "vhost team gone from broker 2")
	_, ok := p.b1.lookupVHost("team")
	require.False(t, ok, "not opened again while being deleted")
}

func TestSharedOrphanedRule(t *testing.T) {
	var alive atomic.Bool
	alive.Store(true)
	s := sharedtest.New()
	withPeers := startBroker(t, Options{Storage: StorageOptions{Meta: s.Meta, Shards: s.Shards, Unacked: s.Index}, Node: "n2",
		peers: peer.Peers{Alive: func(string) bool { return alive.Load() }}})
	noPeers := startBroker(t, Options{Storage: StorageOptions{Meta: s.Meta, Shards: s.Shards, Unacked: s.Index}, Node: "n3"})
	follower := startBroker(t, Options{Storage: StorageOptions{Meta: notLeader{s.Meta}, Shards: s.Shards, Unacked: s.Index}, Node: "n4",
		peers: peer.Peers{Alive: func(string) bool { return alive.Load() }}})
	peer := unacked.Entry{Broker: "n1", Incarnation: 1, Connection: "c#1", State: unacked.Delivered}
	tests := []struct {
		name  string
		b     *Broker
		alive bool
		want  bool
	}{
		{"a live peer's delivery", withPeers, true, false},
		{"a dead peer's delivery", withPeers, false, true},
		{"no peers' liveness: never another's", noPeers, false, false},
		{"a dead peer's delivery, off the meta leader", follower, false, false},
		{"an earlier run of this broker", withPeers, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			alive.Store(tc.alive)
			e := peer
			if tc.name == "an earlier run of this broker" {
				e.Broker, e.Incarnation = tc.b.nodeID, tc.b.incarnation-1
			}
			tc.b.scan.Lock() // orphaned runs during passes only
			defer tc.b.scan.Unlock()
			require.Equal(t, tc.want, tc.b.scan.Orphaned(e))
		})
	}
}

func TestSharedOptions(t *testing.T) {
	s := sharedtest.New()
	tests := []struct {
		name string
		opts Options
		errs []string
	}{
		{"shared stores", Options{Storage: StorageOptions{Meta: s.Meta, Shards: s.Shards, Unacked: s.Index}}, nil},
		{"no shared shards or index", Options{Storage: StorageOptions{Meta: s.Meta}}, []string{
			"broker: Options.Storage.Meta is shared (meta.ChangeFeed): Options.Storage.Shards must be the message store the brokers share",
			"broker: Options.Storage.Meta is shared (meta.ChangeFeed): Options.Storage.Unacked must be the unacked index the brokers share",
		}},
		{"an index that cannot claim", Options{Storage: StorageOptions{Meta: s.Meta, Shards: s.Shards, Unacked: unacked.NewMemoryIndex()}}, []string{
			"broker: Options.Storage.Meta is shared (meta.ChangeFeed): Options.Storage.Unacked must implement unacked.Claimer",
		}},
		{"not shared", Options{Storage: StorageOptions{Meta: metamemory.New(), Shards: memory.New(), Unacked: unacked.NewMemoryIndex()}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(tc.opts)
			if tc.errs == nil {
				require.NoError(t, err)
				require.Equal(t, DefaultNode, b.nodeID)
				_, isFeed := tc.opts.Storage.Meta.(meta.ChangeFeed)
				require.Equal(t, isFeed, b.shared())
				require.NoError(t, b.Close())
				return
			}
			require.Error(t, err)
			for _, text := range tc.errs {
				require.ErrorContains(t, err, text)
			}
		})
	}
}

// A reset (the replica was replaced by a snapshot, and the feed reports
// nothing else) makes the broker reload everything from the store.
func TestSharedResetReloads(t *testing.T) {
	p := newSharedPair(t)
	ctx := context.Background()
	ch2 := sharedChannel(t, p.b2)
	// Written under the feed, as a snapshot install does.
	require.NoError(t, p.s.Meta.Store.PutExchange(ctx, meta.Exchange{VHost: "/", Name: "snap.x", Type: "fanout", Durable: true}))
	require.NoError(t, p.s.Meta.Store.PutQueue(ctx, meta.Queue{VHost: "/", Name: "snap", Durable: true}))
	require.NoError(t, p.s.Meta.Store.PutBinding(ctx, meta.Binding{VHost: "/", Source: "snap.x", Destination: "snap",
		DestinationKind: meta.DestinationQueue, Durable: true}))
	require.NoError(t, p.s.Meta.Store.PutVHost(ctx, meta.VHost{Name: "snapped"}))
	_, ok := p.b2.lookupVHost("snapped")
	require.False(t, ok)

	p.b2.follow.Add(meta.Change{Kind: meta.ChangeReset})
	waitQueue(t, p.b2, "snap", true)
	_, ok = p.b2.lookupVHost("snapped")
	require.True(t, ok)
	require.NoError(t, ch2.PublishWithContext(ctx, "snap.x", "", false, false, amqp091.Publishing{Body: []byte("s")}))
	amqptest.Poll(t, func() bool {
		d, ok, err := ch2.Get("snap", true)
		require.NoError(t, err)
		return ok && string(d.Body) == "s"
	}, "routed through the reloaded binding")
}

// flakyMeta fails ListQueues once, the first time it would list the
// queue named failOn.
type flakyMeta struct {
	*sharedtest.Meta
	failOn string
	failed atomic.Bool
}

func (m *flakyMeta) ListQueues(ctx context.Context, vhost string) ([]meta.Queue, error) {
	qs, err := m.Meta.ListQueues(ctx, vhost)
	for _, q := range qs {
		if q.Name == m.failOn && m.failed.CompareAndSwap(false, true) {
			return nil, errors.New("injected store failure")
		}
	}
	return qs, err
}

// A Sync that fails is tried again later: nobody repeats the change that
// asked for it.
func TestSharedSyncRetried(t *testing.T) {
	s := sharedtest.New()
	b1 := startBroker(t, Options{Storage: StorageOptions{Meta: s.Meta, Shards: s.Shards, Unacked: s.Index}, Node: "n1"})
	flaky := &flakyMeta{Meta: s.Meta, failOn: "late"}
	b2 := startBroker(t, Options{Storage: StorageOptions{Meta: flaky, Shards: s.Shards, Unacked: s.Index}, Node: "n2"})
	amqptest.DeclareQueue(t, sharedChannel(t, b1), "late", true)
	waitQueue(t, b2, "late", true)
	require.True(t, flaky.failed.Load(), "the first sync failed")
}

// Close from many goroutines at once stops the follower once, and leaks
// nothing, while changes keep coming.
func TestSharedConcurrentClose(t *testing.T) {
	amqptest.CheckGoroutines(t)
	s := sharedtest.New()
	b1 := startBroker(t, Options{Storage: StorageOptions{Meta: s.Meta, Shards: s.Shards, Unacked: s.Index}, Node: "n1"})
	b2, err := New(Options{Storage: StorageOptions{Meta: s.Meta, Shards: s.Shards, Unacked: s.Index}, Node: "n2"})
	require.NoError(t, err)
	ch := sharedChannel(t, b1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			if _, err := ch.QueueDeclare(fmt.Sprintf("q%d", i), true, false, false, false, nil); err != nil {
				return
			}
		}
	}()
	var closers sync.WaitGroup
	for range 8 {
		closers.Go(func() { _ = b2.Close() })
	}
	closers.Wait()
	<-done
}

// The consumer timeout is enforced by every broker for its own deliveries,
// not only by the meta leader's.
func TestSharedConsumerTimeoutOffLeader(t *testing.T) {
	s := sharedtest.New()
	b := startBroker(t, Options{Storage: StorageOptions{Meta: notLeader{s.Meta}, Shards: s.Shards, Unacked: s.Index}, Node: "n1",
		ConsumerTimeout: 300 * time.Millisecond})
	ch := sharedChannel(t, b)
	amqptest.DeclareQueue(t, ch, "slow", true)
	amqptest.PublishConfirmed(t, ch, "slow", true, "a")
	errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	msgs, err := ch.Consume("slow", "sleepy", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, "a", string(amqptest.Next(t, msgs).Body)) // and never acked
	e := amqptest.AwaitClose(t, errs)
	require.Equal(t, amqp.PreconditionFailed, uint16(e.Code))
}
