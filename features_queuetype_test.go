package broker_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestQueueTypeEquivalence: a queue declared without x-queue-type is a
// classic queue, so redeclaring it with x-queue-type=classic succeeds, and
// the other way round (RabbitMQ 3.8 and later); a quorum queue is still
// not equivalent to either.
func TestQueueTypeEquivalence(t *testing.T) {
	b, _, _ := featureBroker(t)
	classic := amqp091.Table{"x-queue-type": "classic"}
	quorum := amqp091.Table{"x-queue-type": "quorum"}
	tests := []struct {
		name        string
		durable     bool
		first, then amqp091.Table
		text        string // the 406's; "" when the redeclare succeeds
	}{
		{name: "none then classic", first: nil, then: classic},
		{name: "classic then none", first: classic, then: nil},
		{name: "durable none then classic", durable: true, first: nil, then: classic},
		{name: "durable classic then none", durable: true, first: classic, then: nil},
		{name: "none then quorum", durable: true, first: nil, then: quorum,
			text: "inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received the value 'quorum' of type 'longstr' but current is none"},
		{name: "quorum then none", durable: true, first: quorum, then: nil,
			text: "inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received none but current is the value 'quorum' of type 'longstr'"},
		{name: "quorum then classic", durable: true, first: quorum, then: classic,
			text: "inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received 'classic' but current is 'quorum'"},
		{name: "classic then quorum", durable: true, first: classic, then: quorum,
			text: "inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received 'quorum' but current is 'classic'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
			_, err := ch.QueueDelete("q", false, false, false)
			require.NoError(t, err)
			_, err = ch.QueueDeclare("q", tt.durable, false, false, false, tt.first)
			require.NoError(t, err)
			_, err = ch.QueueDeclare("q", tt.durable, false, false, false, tt.then)
			if tt.text == "" {
				require.NoError(t, err)
				// and back again: what the queue keeps is its first arguments
				_, err = ch.QueueDeclare("q", tt.durable, false, false, false, tt.first)
				require.NoError(t, err)
				return
			}
			amqptest.RequireReply(t, err, 406, tt.text)
		})
	}
}
