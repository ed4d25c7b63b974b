package broker_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// TestBrokerFace holds Broker's public face to its rules: at most 27
// exported methods (what it has; a new one replaces one or argues for
// raising the cap), and every method that may wait for something (a queue's
// actor, a store, a connection's goroutine) takes a context first. The
// methods below return without waiting, or follow a standard library
// convention that has no context (Serve and Close, as net/http's Server;
// Shutdown is the one with a context), each with the reason; a new method
// either takes a context or joins the list with its own.
func TestBrokerFace(t *testing.T) {
	noWait := map[string]string{
		"Admin":              "returns the control plane; its methods take contexts",
		"Addr":               "reads the first listener's address",
		"URL":                "formats Addr",
		"Alarms":             "reads the alarm gate (an atomic)",
		"SetAlarmLimits":     "stores two limits for the monitor to read",
		"SetConsumerTimeout": "stores the timeout for the scanner to read",
		"Listen":             "opens a listener and starts serving it in the background",
		"ListenTLS":          "as Listen",
		"ListenAndServe":     "serves until Close, as net/http's ListenAndServe",
		"Serve":              "serves until Close, as net/http's Server.Serve",
		"Dial":               "connects an in-memory pipe; the handshake is the client's",
		"Close":              "io.Closer; Shutdown(ctx) is the bounded close",
		"Connections":        "reads each connection's counters, never its goroutine",
		"CloseConnection":    "sends connection.close and returns without waiting for close-ok",
		"DelayedCount":       "reads the delayed exchange's counter",
		"MetricsHandler":     "returns an http.Handler; the request carries the context",
		"ManagementHandler":  "as MetricsHandler",
		"Collector":          "returns a prometheus.Collector, which has no context",
	}
	ctxType := reflect.TypeFor[context.Context]()
	bt := reflect.TypeFor[*broker.Broker]()
	require.LessOrEqual(t, bt.NumMethod(), 27, "Broker's exported methods")
	for i := range bt.NumMethod() {
		m := bt.Method(i)
		takesCtx := m.Type.NumIn() > 1 && m.Type.In(1) == ctxType
		if _, listed := noWait[m.Name]; listed {
			require.False(t, takesCtx, "%s takes a context: take it off the list", m.Name)
			continue
		}
		require.True(t, takesCtx, "Broker.%s may wait: its first parameter must be a context.Context (or list it here with why it never waits)", m.Name)
	}
	for name := range noWait {
		_, ok := bt.MethodByName(name)
		require.True(t, ok, "the list names %s, which Broker does not have", name)
	}
}
