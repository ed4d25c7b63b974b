package mgmt_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// The management API client, DialVia, Idle and ErrorBody these tests use
// are internal/amqptest's; only the broker they run against is built here.

// mgmtBroker is a new in-memory broker, closed on cleanup, with the users
// the access tests need.
func mgmtBroker(t *testing.T) *broker.Broker {
	t.Helper()
	b, err := broker.New(broker.Options{Users: []broker.User{
		{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
		{Name: "mon", Password: "mon", Tags: []string{"monitoring"}},
		{Name: "mgr", Password: "mgr", Tags: []string{"management"}},
		{Name: "app", Password: "app"},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}
