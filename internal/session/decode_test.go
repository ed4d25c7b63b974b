package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// TestDecodePublishKeepsStrings checks that decodeMethod decodes a
// channel's publishes to one exchange and routing key without allocating
// for them, and still decodes every field of each publish afresh.
func TestDecodePublishKeepsStrings(t *testing.T) {
	ch := &Channel{}
	payload := func(m *amqp.BasicPublish) []byte {
		f := m.AppendFrame(nil, 1)
		return f[7 : len(f)-1] // the method frame's payload
	}
	key := "perftest-transient-12345-abcdef01-0-0" // past the tiny allocator's 16 bytes
	for _, tc := range []amqp.BasicPublish{
		{Exchange: "amq.direct", RoutingKey: key, Mandatory: true},
		{RoutingKey: key},
		{Exchange: "x", RoutingKey: "other", Immediate: true},
		{},
	} {
		m, err := ch.decodeMethod(payload(&tc))
		require.NoError(t, err)
		require.Equal(t, tc, *m.(*amqp.BasicPublish))
	}

	same := payload(&amqp.BasicPublish{Exchange: "amq.direct", RoutingKey: key})
	_, err := ch.decodeMethod(same)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ch.decodeMethod(same); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}
