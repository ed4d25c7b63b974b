package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/storage"
)

// TestSetArgsKeepsItsPlaceAmongPublishes: a publish sent after SetArgs
// returned runs under the new settings, and one sent before it under the
// old, even when the actor takes both in one step. The test holds the
// state token while it sends, so that the actor, woken by the first send,
// waits and then finds every op at once: the case a loaded machine makes
// (an op posted to the inbox was handled after the mailbox's publishes of
// the same step, so a policy's TTL missed the next message).
func TestSetArgsKeepsItsPlaceAmongPublishes(t *testing.T) {
	withTTL, err := ParseArgs(amqp.Table{"x-message-ttl": int32(100)})
	require.NoError(t, err)
	without, err := ParseArgs(nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		name          string
		declared, set Args
		// which of "before" and "after" carry a deadline
		before, after bool
	}{
		{"a new TTL stamps the next publish", without, withTTL, false, true},
		{"a removed TTL spares the next publish", withTTL, without, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: newStores(), Broker: "n1", Incarnation: 1,
				Features: Features{Args: tc.declared}})
			require.NoError(t, err)
			t.Cleanup(q.Stop)
			require.Eventually(t, q.own.tryAcquire, 5*time.Second, time.Millisecond)
			require.NoError(t, q.Publish(storage.Record{Body: []byte("before")}, NoTTL, nil, 0))
			q.SetArgs(tc.set)
			require.NoError(t, q.Publish(storage.Record{Body: []byte("after")}, NoTTL, nil, 0))
			q.own.release()
			q.Kick()
			stamped := map[string]bool{}
			for range 2 {
				m, _, ok, err := q.Get(ctx, owner, true)
				require.NoError(t, err)
				require.True(t, ok)
				stamped[string(m.Body)] = m.ExpiresAt != 0
			}
			require.Equal(t, map[string]bool{"before": tc.before, "after": tc.after}, stamped)
		})
	}
}
