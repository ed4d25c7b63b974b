package broker_test

import (
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// Hash exchanges over AMQP: each message reaches one bound queue, picked
// by the routing key, a header or a property, the same one every time.
func TestHashExchanges(t *testing.T) {
	tests := []struct {
		name string
		typ  string
		args amqp091.Table
		// msg makes message i; same(i) says which messages must share a
		// queue: those with equal same values.
		msg  func(i int) (key string, p amqp091.Publishing)
		same func(i int) int
	}{
		{"consistent, routing key", "x-consistent-hash", nil,
			func(i int) (string, amqp091.Publishing) { return fmt.Sprint(i % 40), amqp091.Publishing{} },
			func(i int) int { return i % 40 }},
		{"consistent, header", "x-consistent-hash", amqp091.Table{"hash-header": "user"},
			func(i int) (string, amqp091.Publishing) {
				return fmt.Sprint(i), amqp091.Publishing{Headers: amqp091.Table{"user": fmt.Sprint(i % 30)}}
			},
			func(i int) int { return i % 30 }},
		{"consistent, message_id", "x-consistent-hash", amqp091.Table{"hash-property": "message_id"},
			func(i int) (string, amqp091.Publishing) {
				return fmt.Sprint(i), amqp091.Publishing{MessageId: fmt.Sprint(i % 30)}
			},
			func(i int) int { return i % 30 }},
		{"modulus", "x-modulus-hash", nil,
			func(i int) (string, amqp091.Publishing) { return fmt.Sprint(i % 40), amqp091.Publishing{} },
			func(i int) int { return i % 40 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startBroker(t, broker.Options{})
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			ch := amqptest.ConfirmChannel(t, conn)
			require.NoError(t, ch.ExchangeDeclare("hx", tt.typ, true, false, false, false, tt.args))
			for q := range 4 {
				name := fmt.Sprintf("q%d", q)
				amqptest.DeclareQueue(t, ch, name, false)
				require.NoError(t, ch.QueueBind(name, "1", "hx", false, nil))
			}
			const n = 400
			for i := range n {
				key, p := tt.msg(i)
				p.Body = []byte(fmt.Sprint(i))
				amqptest.PublishMsg(t, ch, "hx", key, p)
			}
			where := map[int]string{}
			total := 0
			for q := range 4 {
				name := fmt.Sprintf("q%d", q)
				got := amqptest.GetAll(t, ch, name)
				require.NotEmpty(t, got, "queue %s got nothing", name)
				total += len(got)
				for _, body := range got {
					var i int
					_, err := fmt.Sscan(body, &i)
					require.NoError(t, err)
					s := tt.same(i)
					if prev, ok := where[s]; ok {
						require.Equal(t, prev, name, "messages of one key went to two queues")
					}
					where[s] = name
				}
			}
			require.Equal(t, n, total, "each message reached exactly one queue")
		})
	}
}

func TestConsistentHashBindingKeyRefused(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.ExchangeDeclare("hx", "x-consistent-hash", false, false, false, false, nil))
	amqptest.DeclareQueue(t, ch, "q", false)
	err := ch.QueueBind("q", "ten", "hx", false, nil)
	amqptest.RequireReply(t, err, amqp091.PreconditionFailed, "The binding key must be an integer")
	ch = amqptest.Channel(t, conn)
	err = ch.QueueBind("q", "0", "hx", false, nil)
	amqptest.RequireReply(t, err, amqp091.PreconditionFailed, "The binding key must be greater than 0")
}

// A restart keeps where keys go when the bindings were made in the order
// the store lists them (here, by queue name).
func TestConsistentHashAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	route := func(setup bool) map[string]string {
		b, err := broker.New(broker.Options{DataDir: dir})
		require.NoError(t, err)
		defer b.Close()
		ch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, b.Dial, "guest", "guest"))
		if setup {
			require.NoError(t, ch.ExchangeDeclare("hx", "x-consistent-hash", true, false, false, false, nil))
			for q := range 4 {
				amqptest.DeclareQueue(t, ch, fmt.Sprintf("q%d", q), true)
				require.NoError(t, ch.QueueBind(fmt.Sprintf("q%d", q), fmt.Sprint(q+1), "hx", false, nil))
			}
		}
		for i := range 100 {
			amqptest.PublishMsg(t, ch, "hx", fmt.Sprint(i), amqp091.Publishing{Body: []byte(fmt.Sprint(i)), DeliveryMode: amqp091.Persistent})
		}
		where := map[string]string{}
		for q := range 4 {
			for _, body := range amqptest.GetAll(t, ch, fmt.Sprintf("q%d", q)) {
				where[body] = fmt.Sprintf("q%d", q)
			}
		}
		require.Len(t, where, 100)
		return where
	}
	require.Equal(t, route(true), route(false))
}
