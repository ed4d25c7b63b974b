package broker

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestSharedVHostSettings: a vhost's default queue type and limits set on
// one broker apply on another broker sharing the store (a cluster's
// members), once it followed the change.
func TestSharedVHostSettings(t *testing.T) {
	p := newSharedPair(t)
	ctx := context.Background()
	_, err := p.b1.Admin().PutVHost(ctx, VHost{Name: "/", DefaultQueueType: "quorum"})
	require.NoError(t, err)
	require.NoError(t, p.b1.Admin().PutVHostLimit(ctx, "/", LimitMaxConnections, 1))
	amqptest.Poll(t, func() bool {
		vh, ok := p.b2.lookupVHost("/")
		_, limited := p.b2.limits.ConnectionLimit("/")
		return ok && vh.DefaultQueueType() == "quorum" && limited
	}, "b2 follows b1's settings")

	ch := sharedChannel(t, p.b2)
	_, err = ch.QueueDeclare("q", true, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("q", true, false, false, false, amqp091.Table{"x-queue-type": "classic"})
	amqptest.RequireReply(t, err, 406, "received 'classic' but current is 'quorum'")
	_, err = amqp091.Dial(p.b2.URL())
	amqptest.RequireReply(t, err, 530, "connection limit (1) is reached")

	require.NoError(t, p.b1.Admin().DeleteVHostLimit(ctx, "/", LimitMaxConnections))
	amqptest.Poll(t, func() bool {
		_, limited := p.b2.limits.ConnectionLimit("/")
		return !limited
	}, "b2 follows the cleared limit")
}
