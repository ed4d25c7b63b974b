package broker

import (
	"fmt"
	"time"

	"github.com/warrenmq/broker/amqp"
)

// ForceConsumerTimeout closes channel ch of the connection with the given
// id (ConnectionInfo.ID) now, exactly as the consumer timeout does when a
// delivery outlives Options.ConsumerTimeout: channel.close 406
// PRECONDITION_FAILED with RabbitMQ's text, and every delivery the channel
// held goes back to its queue (redelivered). Tests use it to see a
// consumer survive the timeout without waiting for it. It returns
// ErrNotFound (wrapped) when no such connection or open channel exists.
func (b *Broker) ForceConsumerTimeout(id string, ch uint16) error {
	for _, c := range b.sortedConns() {
		if c.ID() != id {
			continue
		}
		if !c.CloseChannel(ch, amqp.PreconditionFailed, consumerTimeoutText(ch, b.opts.ConsumerTimeout)) {
			return fmt.Errorf("%w: channel %d of connection %q", ErrNotFound, ch, id)
		}
		return nil
	}
	return fmt.Errorf("%w: connection %q", ErrNotFound, id)
}

// consumerTimeoutText is the channel.close text of a consumer timeout, in
// RabbitMQ's (3.12 to 4.x) words.
func consumerTimeoutText(ch uint16, timeout time.Duration) string {
	return fmt.Sprintf("delivery acknowledgement on channel %d timed out. Timeout value used: %d ms.", ch, timeout.Milliseconds())
}
