package direct

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeferredConfirmationFields checks that the Channel can fill in this
// amqp091-go's DeferredConfirmation, and that its own methods then behave
// as for one amqp091-go made: pending until settled, then acked or not.
func TestDeferredConfirmationFields(t *testing.T) {
	require.True(t, deferredUsable(), "amqp091.DeferredConfirmation has no done (chan struct{}) and ack (bool) fields any more: internal/direct/deferred.go must follow amqp091-go")
	for _, ack := range []bool{true, false} {
		dc := newDeferred(7)
		require.Equal(t, uint64(7), dc.DeliveryTag)
		require.NotNil(t, dc.Done())
		require.False(t, dc.Acked())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got, err := dc.WaitContext(ctx)
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, got)

		settleDeferred(dc, ack)
		_, open := <-dc.Done()
		require.False(t, open)
		require.Equal(t, ack, dc.Acked())
		require.Equal(t, ack, dc.Wait())
		got, err = dc.WaitContext(context.Background())
		require.NoError(t, err)
		require.Equal(t, ack, got)
	}
}
