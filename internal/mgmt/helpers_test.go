package mgmt_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// The management API client, DialVia, Idle and ErrorBody these tests use
// are internal/amqptest's; only the broker they run against is built here.

// mgmtBroker is a new in-memory broker, closed on cleanup, with the users
// the access tests need.
func mgmtBroker(t *testing.T) *broker.Broker {
	return mgmtBrokerWith(t, broker.Options{})
}

// mgmtBrokerWith is mgmtBroker with opts (its Users are replaced).
func mgmtBrokerWith(t *testing.T, opts broker.Options) *broker.Broker {
	t.Helper()
	opts.Users = []broker.User{
		{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
		{Name: "mon", Password: "mon", Tags: []string{"monitoring"}},
		{Name: "mgr", Password: "mgr", Tags: []string{"management"}},
		{Name: "app", Password: "app"},
	}
	b, err := broker.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// apiCase is one request to the management API and what it must answer:
// the status and, when reason is set, the error body's reason.
type apiCase struct {
	user, method, path string
	body               any
	status             int
	reason             string
}

// runAPICases sends each case as a subtest named for it.
func runAPICases(t *testing.T, h *amqptest.API, cases []apiCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.user+" "+tc.method+" "+tc.path, func(t *testing.T) {
			status, _, body := h.Do(tc.method, tc.path, tc.user, tc.body)
			require.Equal(t, tc.status, status, "%s", body)
			if tc.reason != "" {
				_, reason := amqptest.ErrorBody(t, body)
				require.Equal(t, tc.reason, reason)
			}
		})
	}
}
