package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/storage"
)

// TestIdleCountsExpiryAsWork: Idle arms the TTL timer before it answers,
// and reports false from the moment a message's TTL passes until its
// dead-lettering is finished (the copy held by the dead-letter exchange
// until the test confirms it, then the source's record deleted): on a
// fake clock advanced by the TTL, and on the real clock with a TTL of 0.
func TestIdleCountsExpiryAsWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		fake *clock.Fake // nil: the real clock
		ttl  time.Duration
	}{
		{name: "fake clock advanced by the TTL", fake: clock.NewFake(time.Unix(100, 0)), ttl: time.Second},
		{name: "real clock, TTL 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			var c clock.Clock = clock.Real
			if tc.fake != nil {
				c = tc.fake
			}
			held := make(chan Confirmer, 1)
			a, err := ParseArgs(amqp.Table{"x-dead-letter-exchange": "dlx"})
			require.NoError(t, err)
			q, err := Start(ctx, Config{
				VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1, Clock: c,
				Features: Features{
					Args:       a,
					DeadLetter: func(string, string, []byte) []*Queue { return nil },
					HoldDeadLetter: func(storage.Record) func(Confirmer) {
						return func(c Confirmer) { held <- c }
					},
				},
			})
			require.NoError(t, err)
			t.Cleanup(q.Stop)
			idle := func() bool {
				ok, err := q.Idle(ctx)
				require.NoError(t, err)
				return ok
			}

			require.NoError(t, q.Publish(storage.Record{Body: []byte("m")}, TTL{D: tc.ttl, Set: true}, nil, 0))
			if tc.fake != nil {
				require.True(t, idle(), "not due by the fake clock")
				require.Equal(t, 1, tc.fake.Pending(), "the TTL timer is armed before Idle answers")
				tc.fake.Advance(tc.ttl)
				require.False(t, idle(), "expired: its dead-lettering is in flight")
			}
			confirm := <-held
			require.False(t, idle(), "the copy is not stored yet")
			confirm.Confirm([]uint64{1}, nil)
			// The source's step deleting its record follows the answer:
			// the first Idle may see it posted, the second sees it done.
			require.True(t, idle() || idle())
			st, err := q.Stats(ctx)
			require.NoError(t, err)
			require.Zero(t, st.Ready)
			require.Equal(t, uint64(1), q.Counters().DeadLettered)
		})
	}
}
