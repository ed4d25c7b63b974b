package broker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/queue"
)

// The broker-bound helpers of the tests that stay in package broker because
// they need its unexported names. The other root tests are in package
// broker_test and use helpers_test.go's, which reach the broker through its
// public API only; the amqp091 helpers are internal/amqptest's.

// startBroker serves a new broker built from opts on 127.0.0.1:0 and closes
// it on cleanup.
func startBroker(tb testing.TB, opts Options) *Broker {
	tb.Helper()
	b, err := New(opts)
	require.NoError(tb, err)
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, b.Close()) })
	return b
}

// newDirectBroker returns an unstarted in-memory broker closed on cleanup.
func newDirectBroker(t *testing.T, opts Options) *Broker {
	t.Helper()
	b, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// queueStats asks the queue's actor for its counts, after every call the
// broker has already handed it.
func queueStats(t *testing.T, b *Broker, name string) queue.Stats {
	t.Helper()
	vh, _ := b.vhosts.Lookup("/")
	q, err := vh.Queue("", name)
	require.NoError(t, err)
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	return st
}

// waitStats polls the queue's counts until cond holds. Settles reach the
// actor asynchronously (basic.ack has no reply), so a test that must see
// one applied waits for its effect rather than sleeping.
func waitStats(t *testing.T, b *Broker, name string, cond func(queue.Stats) bool) queue.Stats {
	t.Helper()
	var st queue.Stats
	amqptest.Poll(t, func() bool {
		st = queueStats(t, b, name)
		return cond(st)
	}, "queue %s never reached the expected state; last %+v", name, &st)
	return st
}

// getOK serves GET path on h as guest and returns the body, failing the
// test unless the answer is 200.
func getOK(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.SetBasicAuth("guest", "guest")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return rec.Body.String()
}

// fullPermissionOn is every permission for user on vhost (what seeded
// users get), as Admin.PutPermission takes it.
func fullPermissionOn(user, vhost string) Permission {
	return Permission{User: user, VHost: vhost, Configure: ".*", Write: ".*", Read: ".*"}
}
