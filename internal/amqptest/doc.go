// Package amqptest holds the test helpers every package's tests share, so
// there is one of each:
//
//   - amqp091-go clients: Dial, DialVia (over a dial function such as a
//     broker's Dial, with a connection name), UserURL, Channel,
//     ConfirmChannel and RequireWorks (the connection still answers);
//   - messages: DeclareQueue, Publish and PublishMsg (one message, waiting
//     for its confirm), PublishBodies and PublishConfirmed (many bodies to
//     a queue), Numbered, Get, GetAll, RequireEmpty, Next, QueueExists and
//     ExchangeExists;
//   - errors: RequireCode asserts an AMQP reply code on either client's
//     error type (amqp091-go's or the amqp package's), RequireReply also
//     its text, and AwaitClose waits for a server-sent close;
//   - waiting: every wait is bounded by Timeout, which only turns a hang
//     into a failure; Receive reads a channel, Poll waits for an effect the
//     broker applies asynchronously, Idle waits for a broker's WaitIdle
//     (bounded by IdleTimeout), WaitClosed reads a raw socket until the
//     server closes it (bounded by ClosedTimeout), and CheckGoroutines
//     fails a test that leaves goroutines behind;
//   - the management API: API serves any http.Handler on an httptest
//     server and sends requests as a user whose password is its name (Do),
//     Get decodes a 200's JSON, URL and Client serve other clients, and
//     ErrorBody decodes RabbitMQ's {"error":..,"reason":..};
//   - definitions: Topology lists a definitions export's exchanges, queues
//     and bindings as strings, to compare two brokers' topologies;
//   - RawClient speaks AMQP frame by frame over any net.Conn (a TCP socket
//     to a broker or one end of a net.Pipe served by a session) to test
//     what a well-behaved client never sends.
//
// It imports amqp, definitions, amqp091-go and testify but not the root
// package, so the tests of internal packages and both the internal and
// the external tests of the root can use it; helpers that would need a
// broker take what they use of it instead (a handler, a dial, a WaitIdle
// or an Admin().Export function). Helpers that need a *broker.Broker
// live beside the root's tests (helpers_test.go) or in brokertest. The
// internal tests of amqp and of what definitions imports (passwd,
// routing) cannot use it; amqp keeps its local helper.
package amqptest
