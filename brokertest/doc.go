// Package brokertest starts Warren brokers for tests, the way net/http's
// httptest starts servers, and makes them fail on purpose.
//
// # A broker per test
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
// # The fault lab
//
// NewLab starts a Lab: a broker whose bad days a test makes happen. Its
// durable state lives in in-memory stores that outlive the broker, behind
// one fault injector; its clients reach it through Links, which keep
// their address (a TCP port, and a socket-free door) while the broker
// behind them is replaced. Each fault below is one call; the Example
// functions show each in a few lines.
//
// Lifecycle:
//
//   - Lab.Restart: graceful, as `rabbitmqctl stop` and a start. Clients get
//     320 CONNECTION_FORCED; durable queues, persistent messages and the
//     deliveries then unacked (redelivered=true) come back; transient
//     queues and messages are gone.
//   - Lab.Crash: kill -9. The stores stop taking writes at once (a call
//     held by HangStore dies with the process), connections are reset
//     without connection.close, and the new broker starts on what the
//     stores had acknowledged: every confirmed persistent message, never
//     an unconfirmed one that had not reached the store.
//   - Lab.Reset: a fresh, empty broker on the same addresses, for the next
//     subtest.
//
// A reconnect loop written for amqp091-go (NotifyClose, dial again,
// declare again, consume again) rides out all three; the tests of this
// package run one over TCP and over the socket-free door.
//
// Connections:
//
//   - Lab.CloseConnections, Lab.CloseConnectionsWhere: close by
//     client-provided name (amqp091.Table.SetClientConnectionName) or by
//     predicate with a chosen code; ConnectionForced and
//     ManagementCloseReason do what RabbitMQ's management API does.
//   - Lab.ForceConsumerTimeout: the consumer timeout, now (406, RabbitMQ's
//     text); what the channel held is requeued.
//   - Lab.RaiseAlarm, Lab.ClearAlarm: memory and disk alarms
//     (connection.blocked with RabbitMQ's reason).
//
// Network, per Link (Lab.Net is the default one; Lab.NewLink gives a
// client a path of its own), on TCP and on the socket-free door alike:
// Link.Latency, Link.Bandwidth, Link.BlackHole (writes vanish, nothing
// arrives, no close: heartbeats must notice), Link.Partition and
// Link.Heal (held bytes are delivered), Link.ResetAfter (a reset after n
// bytes) and Link.Cut (every connection reset now, as when the client
// process dies). Connection deadlines are honoured while bytes are held,
// so a client's heartbeat check works as on a real socket. WaitIdle
// cannot see bytes a Link holds back.
//
// Stores (built on internal/faultstore): Lab.FailAppends and
// Lab.FailStore (publishers get basic.nack for what could not be stored),
// Lab.DiskFull and Lab.DiskFreed (the disk alarm, and every write fails
// with ENOSPC), Lab.HangStore (one call waits until Release).
//
// Observation: Lab.WaitQueue (and WaitQueue for any broker) waits until a
// queue's ready, unacked or consumer counts satisfy a condition, bounded
// by a context, without a sleep in the test; Lab.Trace is the wire trace
// of every connection (each frame, decoded, timed, "C>" from the client
// and "S>" from the broker), which the Lab also prints through t.Log when
// the test fails.
//
// Time: give Options.Clock a *clock.Fake and Lab.Advance moves it; TTLs
// and queue expiry follow it. A message expires once its age reaches its
// TTL (as RabbitMQ's Now >= Expiry), counted from when the broker
// accepted the publish, so publish-then-Advance needs no WaitIdle in
// between. The consumer timeout measures a delivery's age with the same
// clock (the scanner that enforces it still looks every ScanInterval of
// real time); heartbeats stay on real time.
//
// docs/testing.md walks through the lab; examples/ledger uses it to prove
// an at-least-once consumer against PostgreSQL.
//
// Brokers and Labs share nothing: any number may run in parallel tests.
// Every function taking a testing.TB must be called from the test's
// goroutine (they call t.Fatal); the Lab's other methods may be called
// from any goroutine. Cleanups run in reverse order, so connections and
// channels opened with Dial and Channel are closed before their broker.
package brokertest
