package mgmt

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/rates"
)

// TestQueueSortValueMatchesJSON: for every key a queue knows (keyed), its
// sortValue orders queues exactly as the JSON path (dotted on the
// queue's JSON object) does, including queues without a rate history
// and counters a queue never shows; keys it does not know are left to
// the JSON path.
func TestQueueSortValueMatchesJSON(t *testing.T) {
	d := func(rate float64) rates.Details {
		return rates.Details{Rate: rate, Samples: []rates.Sample{{Sample: 1, Timestamp: 1}}}
	}
	pd := func(rate float64) *rates.Details { v := d(rate); return &v }
	policy := "p"
	queues := []queueJSON{
		{Name: "no-history", VHost: "/", MessageStats: map[string]any{"publish": uint64(3), "ack": uint64(0)}},
		{Name: "empty-stats", VHost: "/"},
		{Name: "fast", VHost: "/", Messages: 9, policyFields: policyFields{Policy: &policy}, MessagesDetails: pd(0.5), MessagesReadyDetails: pd(0.25), MessagesUnacknowledgedDetails: pd(0),
			MessageStats: map[string]any{"publish": uint64(1 << 40), "publish_details": d(250.5), "ack": uint64(7), "ack_details": d(0.2)}},
		{Name: "slow", VHost: "b", MessagesDetails: pd(2), MessagesReadyDetails: pd(0), MessagesUnacknowledgedDetails: pd(1),
			MessageStats: map[string]any{"publish": uint64(2), "publish_details": d(0.1), "ack": uint64(7), "ack_details": d(3)}},
		{Name: "zero-rate", VHost: "a", MessageStats: map[string]any{"publish": uint64(0), "publish_details": d(0)}},
	}
	objs, err := jsonObjects(queues)
	require.NoError(t, err)

	known := []string{"name", "vhost", "messages", "policy",
		"messages_details.rate", "messages_ready_details.rate", "messages_unacknowledged_details.rate",
		"message_stats.publish", "message_stats.publish_details.rate", "message_stats.ack", "message_stats.ack_details.rate",
		"message_stats.confirm", "message_stats.confirm_details.rate"}
	for _, key := range known {
		t.Run(key, func(t *testing.T) {
			_, ok := queueJSON{}.sortValue(key)
			require.True(t, ok, "a zero queue must know %s for the fast path to take it", key)
			for i, a := range queues {
				for j, b := range queues {
					va, _ := a.sortValue(key)
					vb, _ := b.sortValue(key)
					require.Equal(t, compareTerms(dotted(objs[i], key), dotted(objs[j], key)), compareTerms(va, vb),
						fmt.Sprintf("%s vs %s: %v vs %v", a.Name, b.Name, va, vb))
				}
			}
		})
	}
	for _, key := range []string{"message_stats", "message_stats.publish_details", "message_stats.publish_details.avg_rate",
		"message_stats.publish_details.samples", "message_stats.publish.rate", "messages_details", "arguments.x-max-length"} {
		_, ok := queueJSON{}.sortValue(key)
		require.False(t, ok, "%s is left to the JSON path", key)
	}
}
