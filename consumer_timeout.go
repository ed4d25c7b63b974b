package broker

import (
	"fmt"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/scan"
)

// The consumer timeout's precedence and verdicts are internal/scan's
// (scan.Timeouts); the scanner is started in scanner.go.

// forceConsumerTimeout closes channel ch of the connection with the given
// id (ConnectionInfo.ID) now, exactly as the consumer timeout does when a
// delivery outlives Options.ConsumerTimeout: channel.close 406
// PRECONDITION_FAILED with RabbitMQ's text, and every delivery the channel
// held goes back to its queue (redelivered). Tests reach it through
// brokertest's Lab (testhook.ForceConsumerTimeout) to see a consumer
// survive the timeout without waiting for it. It returns ErrNotFound
// (wrapped) when no such connection or open channel exists.
func (b *Broker) forceConsumerTimeout(id string, ch uint16) error {
	for _, c := range b.sortedConns() {
		if c.ID() != id {
			continue
		}
		if !c.CloseChannel(ch, amqp.PreconditionFailed, scan.TimeoutText(ch, b.scan.Timeout())) {
			return fmt.Errorf("%w: channel %d of connection %q", ErrNotFound, ch, id)
		}
		return nil
	}
	return fmt.Errorf("%w: connection %q", ErrNotFound, id)
}
