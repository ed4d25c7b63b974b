package events

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// SubscribeFunc's function gets every event of its kinds, however many
// (no buffer to overflow), during Emit; after its context ends, or the
// Hub closes, it gets nothing, and the Hub's wanted bits drop with it.
func TestSubscribeFunc(t *testing.T) {
	tests := []struct {
		name string
		end  func(cancel context.CancelFunc, h *Hub)
	}{
		{"context ends", func(cancel context.CancelFunc, _ *Hub) { cancel() }},
		{"hub closes", func(_ context.CancelFunc, h *Hub) { h.Close() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub(nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var created, other atomic.Int64
			SubscribeFunc(ctx, h, MaskOf(BindingCreated, BindingDeleted), func(e Event) {
				if e.Kind == BindingCreated && e.Exchange == "x" {
					created.Add(1)
					return
				}
				other.Add(1)
			})
			require.True(t, h.On(BindingCreated))
			require.False(t, h.On(ConsumerCreated))
			for range 10000 {
				h.Emit(Event{Kind: BindingCreated, Exchange: "x"})
			}
			h.Emit(Event{Kind: ConsumerCreated})
			require.EqualValues(t, 10000, created.Load(), "every event, none dropped, before Emit returned")
			require.Zero(t, other.Load(), "only its kinds")
			tc.end(cancel, h)
			require.Eventually(t, func() bool { return !h.On(BindingCreated) }, 5*time.Second, time.Millisecond, "unregistered")
			h.Emit(Event{Kind: BindingCreated, Exchange: "x"})
			require.EqualValues(t, 10000, created.Load(), "nothing after it ended")
		})
	}
}
