// Package amqptest holds the test helpers every package's tests share: Channel
// opens an amqp091-go channel, RequireCode asserts an AMQP reply code on
// either client's error type, and RawClient speaks AMQP frame by frame over
// any net.Conn (a TCP socket to a broker or one end of a net.Pipe served by
// a session) to test what a well-behaved client never sends.
//
// It imports amqp, amqp091-go and testify but not the root package, so the
// tests of internal packages can use it too. The amqp package's own internal
// tests cannot (amqptest imports amqp); they keep their local helper.
package amqptest
