package broker_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/meta/local"
	"github.com/warrenmq/broker/storage/pebble"
)

// The broker-bound helpers of the root's tests in package broker_test; they
// reach the broker through its public API only. The amqp091 helpers are
// internal/amqptest's; helpers_internal_test.go has the few the tests that
// need unexported names use.

// startBroker serves a new broker built from opts on 127.0.0.1:0 and closes
// it on cleanup.
func startBroker(tb testing.TB, opts broker.Options) *broker.Broker {
	tb.Helper()
	b := brokertest.NewUnstarted(tb, opts)
	brokertest.Start(tb, b)
	return b
}

// fullPermission grants everything, as Options.Users get on every vhost.
var fullPermission = broker.Permission{Configure: ".*", Write: ".*", Read: ".*"}

// fullPermissionOn is fullPermission for user on vhost, as
// Admin.PutPermission takes it.
func fullPermissionOn(user, vhost string) broker.Permission {
	return permissionOn(fullPermission, user, vhost)
}

// permissionOn is p's expressions for user on vhost.
func permissionOn(p broker.Permission, user, vhost string) broker.Permission {
	p.User, p.VHost = user, vhost
	return p
}

// addVHost creates the vhost name on b, which must not exist yet.
func addVHost(t testing.TB, b *broker.Broker, name string) {
	t.Helper()
	created, err := b.Admin().PutVHost(context.Background(), broker.VHost{Name: name})
	require.NoError(t, err)
	require.True(t, created, "vhost %q existed already", name)
}

// setup starts an in-memory broker on TCP and connects one client; it
// checks first that the test leaves no goroutine behind.
func setup(t *testing.T) (*broker.Broker, *amqp091.Connection) {
	t.Helper()
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	return b, amqptest.Dial(t, b.URL(), amqp091.Config{})
}

// queueCounts are the counts of a queue's QueueStats the tests compare.
type queueCounts struct {
	Ready, Unacked uint64
	Consumers      int
}

// queueStats returns the counts of queue name on vhost "/" from
// Broker.Stats, which asks the queue's actor, so it sees every call the
// broker has already handed the queue. The queue must exist.
func queueStats(tb testing.TB, b *broker.Broker, name string) queueCounts {
	tb.Helper()
	for _, q := range b.Stats(context.Background()).QueueDetails {
		if q.VHost == "/" && q.Name == name {
			return queueCounts{Ready: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers}
		}
	}
	require.FailNow(tb, "no such queue", "queue %q on vhost /", name)
	return queueCounts{}
}

// queueExists reports whether vhost "/" has queue name, from Broker.Stats:
// unlike a passive declare, asking does not count as using the queue
// (x-expires).
func queueExists(b *broker.Broker, name string) bool {
	for _, q := range b.Stats(context.Background()).QueueDetails {
		if q.VHost == "/" && q.Name == name {
			return true
		}
	}
	return false
}

// waitStats polls the queue's counts until cond holds. Settles reach the
// actor asynchronously (basic.ack has no reply), so a test that must see
// one applied waits for its effect rather than sleeping.
func waitStats(tb testing.TB, b *broker.Broker, name string, cond func(queueCounts) bool) queueCounts {
	tb.Helper()
	var st queueCounts
	amqptest.Poll(tb, func() bool {
		st = queueStats(tb, b, name)
		return cond(st)
	}, "queue %s never reached the expected state; last %+v", name, &st)
	return st
}

// requireServes shows the broker still serves conn: a new channel
// declares a server-named queue, routes a message to it and reads it back.
func requireServes(tb testing.TB, conn *amqp091.Connection) {
	tb.Helper()
	ch := amqptest.ConfirmChannel(tb, conn)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(tb, err)
	amqptest.Publish(tb, ch, "", q.Name, "still serving")
	require.Equal(tb, []string{"still serving"}, amqptest.GetAll(tb, ch, q.Name))
	_, err = ch.QueueDelete(q.Name, false, false, false)
	require.NoError(tb, err)
	require.NoError(tb, ch.Close())
}

// awaitQueueGone polls until the queue is gone: for deletions the broker
// finishes after its reply to the client (a connection's exclusive queues
// go once it has closed).
func awaitQueueGone(tb testing.TB, conn *amqp091.Connection, name string) {
	tb.Helper()
	amqptest.Poll(tb, func() bool { return !amqptest.QueueExists(tb, conn, name) }, "queue %q still exists", name)
}

// pebbleOptions are broker options whose stores are one Pebble DB on fs,
// given as the broker's own stores (Meta, Shards, Unacked) rather than by
// DataDir; the DB is closed on cleanup.
func pebbleOptions(t *testing.T, fs vfs.FS) broker.Options {
	t.Helper()
	db, err := pebble.Open("db", pebble.WithFS(fs), pebble.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	m, err := local.New(db)
	require.NoError(t, err)
	return broker.Options{Storage: broker.StorageOptions{Meta: m, Shards: pebble.New(db), Unacked: pebble.NewIndex(db)}}
}
