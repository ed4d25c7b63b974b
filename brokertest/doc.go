// Package brokertest starts Warren brokers for tests, the way net/http's
// httptest starts servers.
//
// New gives each test its own in-memory broker, listening on 127.0.0.1 on
// a free port and closed when the test ends; Dial connects amqp091-go to it
// without a socket, and Channel opens a direct in-process channel:
//
//	func TestOrders(t *testing.T) {
//		t.Parallel()
//		b := brokertest.New(t)
//		ch, err := brokertest.Dial(t, b).Channel()
//		if err != nil {
//			t.Fatal(err)
//		}
//		// ... use ch as against RabbitMQ
//	}
//
// NewUnstarted takes Options (users, vhosts, limits, stores, a data
// directory) and does not listen until Start.
//
// Brokers share nothing: any number may run in parallel tests. Every
// function must be called from the test's goroutine (they call t.Fatal).
// Cleanups run in reverse order, so connections and channels opened with
// Dial and Channel are closed before their broker.
package brokertest
