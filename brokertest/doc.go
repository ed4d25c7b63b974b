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
// behind them is replaced. Each fault is one call; the recipes below show
// each (the Example functions have them too):
//
//	lab := brokertest.NewLab(t, broker.Options{})
//	conn := lab.DialAMQP(t, "orders")   // socket-free, named "orders"
//	tcp, err := amqp091.Dial(lab.URL()) // or over TCP
//
// # Lifecycle
//
//	err = lab.Restart() // graceful: clients get 320, durable state comes back
//	err = lab.Crash()   // kill -9: connections reset, confirmed messages survive
//	err = lab.Reset()   // a fresh, empty broker on the same addresses
//
// Restart is `rabbitmqctl stop` and a start: clients get 320
// CONNECTION_FORCED; durable queues, persistent messages and the
// deliveries then unacked (redelivered=true) come back; transient queues
// and messages are gone. Crash is kill -9: the stores stop taking writes
// at once (a call held by HangStore dies with the process), connections
// are reset without connection.close, and the new broker starts on what
// the stores had acknowledged: every confirmed persistent message, never
// an unconfirmed one that had not reached the store. Reset is for the
// next subtest.
//
// A reconnect loop written for amqp091-go (NotifyClose, dial again,
// declare again, consume again), and amqp091-go's own recovery
// (Config.Recovery with topology recovery), ride out all three; the tests
// of this package run both over TCP and over the socket-free door.
//
// # Connections
//
//	n, err := lab.CloseConnections("orders", brokertest.ConnectionForced, brokertest.ManagementCloseReason)
//	n, err = lab.CloseConnectionsWhere(func(c broker.ConnectionInfo) bool { return c.User == "app" }, 320, "bye")
//	err = lab.ForceConsumerTimeout("orders", 1) // channel 1 closed with 406
//	lab.RaiseAlarm(broker.AlarmMemory)          // connection.blocked
//	lab.ClearAlarm(broker.AlarmMemory)          // connection.unblocked
//
// CloseConnections closes by client-provided name
// (amqp091.Table.SetClientConnectionName), CloseConnectionsWhere by
// predicate, with a chosen code; ConnectionForced and
// ManagementCloseReason do what RabbitMQ's management API does. The
// forced consumer timeout carries RabbitMQ's 406 text and requeues what
// the channel held. Alarms block publishers with RabbitMQ's reason.
//
// # Network
//
//	net := lab.NewLink("consumer")     // a path of its own; lab.Net() is the default one
//	conn = net.DialAMQP(t, "consumer") // or amqp091.Dial(net.URL())
//	net.Latency(20 * time.Millisecond) // each way
//	net.Bandwidth(64 << 10)            // bytes per second, each way
//	net.Partition()                    // bytes held both ways...
//	net.Heal()                         // ...and delivered now
//	net.BlackHole()                    // bytes vanish, no close: heartbeats must notice
//	net.ResetAfter(4096)               // a TCP reset after 4096 more bytes
//	net.Cut()                          // every connection reset now (the client died)
//
// Network faults act on TCP and on the socket-free door alike, on the
// connections already open and on new ones. Connection deadlines are
// honoured while bytes are held, so a client's heartbeat check works as
// on a real socket. WaitIdle cannot see bytes a Link holds back.
//
// # Stores
//
//	lab.FailAppends(3)                                            // the next 3 appends fail: basic.nack
//	lab.FailStore(brokertest.StoreAck, 1, brokertest.ErrDiskFull) // any store call, any error
//	lab.DiskFull()                                                // disk alarm, every write ENOSPC
//	lab.DiskFreed()
//	lab.ClearStoreFaults()
//	hang := lab.HangStore(brokertest.StoreAppend) // the next append waits...
//	<-hang.Arrived()
//	hang.Release() // ...until released
//
// Store faults are built on internal/faultstore; publishers get
// basic.nack for what could not be stored, as on a disk error. A
// persistent publish is written and synced by one append, so FailAppends
// is also how a failed sync looks to a publisher.
//
// # Observation
//
//	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//	defer cancel()
//	_, err = lab.WaitQueue(ctx, "orders", brokertest.Ready(3))
//	_, err = lab.WaitQueue(ctx, "orders", brokertest.Unacked(0))
//	_, err = lab.WaitQueue(ctx, "orders", brokertest.Consumers(1))
//	t.Log(lab.Trace()) // every frame of every connection, decoded and timed
//
// WaitQueue (also a function, for any broker) waits until a queue's
// ready, unacked or consumer counts satisfy a condition, bounded by a
// context, without a sleep in the test. Trace marks frames "C>" from the
// client and "S>" from the broker; the Lab prints it through t.Log when
// the test fails.
//
// # Time
//
//	lab = brokertest.NewLab(t, broker.Options{Clock: clock.NewFake(time.Now())})
//	// ... publish to a queue with x-message-ttl 60000 ...
//	lab.Advance(time.Minute) // expired: no WaitIdle needed in between
//
// TTLs and queue expiry follow Options.Clock. A message expires once its
// age reaches its TTL (as RabbitMQ's Now >= Expiry), counted from when
// the broker accepted the publish, so publish-then-Advance needs no
// WaitIdle in between. The consumer timeout measures a delivery's age
// with the same clock (the scanner that enforces it still looks every
// ScanInterval of real time); heartbeats stay on real time.
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
