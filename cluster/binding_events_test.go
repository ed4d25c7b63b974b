package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// TestBindingEventsOnEveryMember: a binding made and removed on one
// member is binding.created and binding.deleted on another too, as that
// one starts and stops routing by it (its vhost follows the store).
func TestBindingEventsOnEveryMember(t *testing.T) {
	c := newTestCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs := c.broker(2).Events(ctx, 16, broker.BindingCreated, broker.BindingDeleted)
	_, ch := c.dial(0)
	require.NoError(t, ch.ExchangeDeclare("x", "direct", true, false, false, false, nil))
	_, err := ch.QueueDeclare("q", true, false, false, false, nil)
	require.NoError(t, err)
	next := func(want broker.EventKind) {
		t.Helper()
		select {
		case e := <-evs:
			require.Equal(t, want, e.Kind)
			require.Equal(t, "x", e.Exchange)
			require.Equal(t, "q", e.Destination)
			require.Equal(t, "queue", e.DestinationKind)
			require.Equal(t, "k", e.RoutingKey)
		case <-time.After(waitFor):
			t.Fatalf("member 3 told no %v", want)
		}
	}
	// One at a time: a sync that found both would see no change.
	require.NoError(t, ch.QueueBind("q", "k", "x", false, nil))
	next(broker.BindingCreated)
	require.NoError(t, ch.QueueUnbind("q", "k", "x", nil))
	next(broker.BindingDeleted)
}
