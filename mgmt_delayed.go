package broker

import (
	"context"

	"github.com/warrenmq/broker/internal/mgmt"
)

// The management API's view of delayed messages (mgmt.Delayed).
var _ mgmt.Delayed = mgmtView{}

func (v mgmtView) DelayedCount(vhost, exchange string) int64 {
	n, _ := v.b.DelayedCount(vhost, exchange)
	return n
}

func (v mgmtView) PeekDelayed(ctx context.Context, vhost, exchange string, n int) ([]mgmt.DelayedMessage, error) {
	msgs, err := v.b.PeekDelayed(ctx, vhost, exchange, n)
	if err != nil {
		return nil, err
	}
	out := make([]mgmt.DelayedMessage, len(msgs))
	for i, m := range msgs {
		out[i] = mgmt.DelayedMessage{RoutingKey: m.RoutingKey, Due: m.Due, Delay: m.Delay, Publishing: m.Publishing}
	}
	return out, nil
}
