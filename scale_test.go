package broker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/definitions"
)

// walSyncs counts the syncs of Pebble's WAL files, each taking delay.
type walSyncs struct {
	n     atomic.Int64
	delay time.Duration
}

func (c *walSyncs) String() string { return "walSyncs" }

func (c *walSyncs) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		if strings.HasSuffix(op.Path, ".log") {
			c.n.Add(1)
			time.Sleep(c.delay)
		}
	}
	return nil
}

// countingBroker returns a broker on a Pebble DB in memory whose WAL syncs
// syncs counts.
func countingBroker(t *testing.T, delay time.Duration) (*broker.Broker, *walSyncs) {
	t.Helper()
	syncs := &walSyncs{delay: delay}
	b := brokertest.NewUnstarted(t, pebbleOptions(t, errorfs.Wrap(vfs.NewMem(), syncs)))
	return b, syncs
}

// A definitions import is one fsync at its end, not one per queue and
// binding: importing 100,000 durable queues took 100,000 syncs. What it
// declared is on disk when it returns.
func TestImportDefinitionsSyncsOnce(t *testing.T) {
	const n = 200
	b, syncs := countingBroker(t, 0)
	d := &definitions.File{}
	for i := range n {
		name := fmt.Sprintf("q%d", i)
		d.Queues = append(d.Queues, definitions.Queue{Name: name, VHost: "/", Durable: true})
		d.Bindings = append(d.Bindings, definitions.Binding{Source: "amq.direct", VHost: "/", Destination: name, DestinationType: "queue", RoutingKey: name})
	}
	before := syncs.n.Load()
	require.NoError(t, b.Admin().Import(context.Background(), d))
	got := syncs.n.Load() - before
	t.Logf("%d WAL syncs for %d queues and %d bindings", got, n, n)
	require.LessOrEqual(t, got, int64(2))
	require.GreaterOrEqual(t, got, int64(1), "the import is on disk when it returns")
	st := b.Stats()
	require.Len(t, st.QueueDetails, n)
}

// Deleting a durable queue is one fsync however many bindings it has: its
// record, its cursor and its bindings' records were each synced on their
// own. The delete is on disk when it returns.
func TestQueueDeleteSyncsOnce(t *testing.T) {
	b, syncs := countingBroker(t, 0)
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("q", true, false, false, false, nil)
	require.NoError(t, err)
	for _, key := range []string{"a", "b", "c"} {
		require.NoError(t, ch.QueueBind("q", key, "amq.direct", false, nil))
	}
	before := syncs.n.Load()
	_, err = ch.QueueDelete("q", false, false, false)
	require.NoError(t, err)
	got := syncs.n.Load() - before
	t.Logf("%d WAL syncs to delete a queue with 3 bindings", got)
	require.EqualValues(t, 1, got)
	require.Empty(t, b.Stats().QueueDetails)
}

// Declarations on different connections share fsyncs: each used to hold
// the vhost's topology lock across its own, so they queued for the disk
// one by one. The WAL syncs here take a millisecond each, long enough for
// the other declarers to join the next one.
func TestConcurrentDeclaresShareSyncs(t *testing.T) {
	const clients, each = 20, 5
	b, syncs := countingBroker(t, time.Millisecond)
	chans := make([]*broker.Channel, clients)
	for i := range chans {
		chans[i] = brokertest.Channel(t, b)
	}
	before := syncs.n.Load()
	var wg sync.WaitGroup
	errs := make(chan error, clients*each)
	for i, ch := range chans {
		wg.Go(func() {
			for j := range each {
				_, err := ch.QueueDeclare(fmt.Sprintf("c%d-%d", i, j), true, false, false, false, nil)
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := syncs.n.Load() - before
	t.Logf("%d WAL syncs for %d concurrent durable declarations", got, clients*each)
	require.Less(t, got, int64(clients*each*3/4))
	require.Len(t, b.Stats().QueueDetails, clients*each)
}

// A redeclaration of a durable queue whose declaration has synced costs
// no fsync: only one that finds the definition still unsynced (another
// connection's declaration between its write and its sync) syncs before
// it answers.
func TestRedeclareOfSyncedQueueSyncsNothing(t *testing.T) {
	b, syncs := countingBroker(t, 0)
	ch := brokertest.Channel(t, b)
	before := syncs.n.Load()
	_, err := ch.QueueDeclare("q", true, false, false, false, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, syncs.n.Load()-before)
	for range 3 {
		_, err = ch.QueueDeclare("q", true, false, false, false, nil)
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, syncs.n.Load()-before)
}
