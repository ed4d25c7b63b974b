package testhook

// ForceConsumerTimeout closes channel ch of the connection with the given
// id on broker b, as the consumer timeout does when a delivery outlives
// Options.ConsumerTimeout: channel.close 406 PRECONDITION_FAILED with
// RabbitMQ's text, and every delivery the channel held goes back to its
// queue (redelivered). It returns an error wrapping broker.ErrNotFound
// when no such connection or open channel exists.
var ForceConsumerTimeout func(b any, id string, ch uint16) error
