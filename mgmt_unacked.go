package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/warrenmq/broker/internal/mgmt"
)

var _ mgmt.UnackedLister = mgmtView{}

// Unacked lists a queue's unsettled deliveries for the management API's
// GET /api/queues/v/q/unacked (Broker.Unacked, without bodies), each
// with how long it has been held by the broker's clock.
func (v mgmtView) Unacked(ctx context.Context, vhostName, queueName string) ([]mgmt.Unacked, error) {
	us, err := v.b.Unacked(ctx, vhostName, queueName)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", mgmt.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	now := v.b.clock().Now()
	out := make([]mgmt.Unacked, len(us))
	for i, u := range us {
		age := max(now.Sub(u.DeliveredAt), 0)
		if u.DeliveredAt.IsZero() {
			age = -1
		}
		out[i] = mgmt.Unacked{
			Connection: u.Connection, Channel: u.Channel, DeliveryTag: u.DeliveryTag, ConsumerTag: u.ConsumerTag,
			DeliveryCount: u.DeliveryCount, Redelivered: u.Redelivered, Age: age,
			Exchange: u.Exchange, RoutingKey: u.RoutingKey, MessageID: u.MessageID, PayloadBytes: u.BodySize,
		}
	}
	return out, nil
}
