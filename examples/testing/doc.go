// Package orders is a small application package, here to show how its
// tests get a real AMQP broker with brokertest (see orders_test.go): no
// container, no port to pick, one fresh broker per test.
//
// The package depends on an interface over the amqp091-go channel methods
// it uses, so a *amqp091.Channel (connected to RabbitMQ or to Warren) and
// Warren's in-process *broker.Channel both satisfy it.
package orders
