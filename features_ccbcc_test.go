package broker_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestSenderSelectedDistribution: the CC and BCC headers add routing keys
// for one publish through the same exchange (RabbitMQ 3.13 and 4.x); BCC is
// gone from what consumers get, CC is not, and a queue several keys reach
// gets one copy.
func TestSenderSelectedDistribution(t *testing.T) {
	_, _, ch := featureBroker(t)
	require.NoError(t, ch.Confirm(false)) // for amqptest.PublishMsg
	for _, q := range []string{"a", "b", "c", "d"} {
		amqptest.DeclareQueue(t, ch, q, false)
	}
	require.NoError(t, ch.ExchangeDeclare("dx", "direct", false, false, false, false, nil))
	require.NoError(t, ch.ExchangeDeclare("tx", "topic", false, false, false, false, nil))
	for _, b := range [][3]string{
		{"a", "dx", "ka"}, {"b", "dx", "kb"}, {"c", "dx", "kc"}, {"c", "dx", "kc2"},
		{"a", "tx", "news.#"}, {"b", "tx", "*.sport"}, {"c", "tx", "weather.*"},
	} {
		require.NoError(t, ch.QueueBind(b[0], b[2], b[1], false, nil))
	}
	tests := []struct {
		name     string
		exchange string
		key      string
		headers  amqp091.Table
		want     []string // queues that get exactly one copy
	}{
		{"direct CC", "dx", "ka", amqp091.Table{"CC": []any{"kb"}}, []string{"a", "b"}},
		{"direct BCC", "dx", "ka", amqp091.Table{"BCC": []any{"kc"}}, []string{"a", "c"}},
		{"direct CC and BCC", "dx", "nothing", amqp091.Table{"CC": []any{"kb"}, "BCC": []any{"kc"}}, []string{"b", "c"}},
		{"a queue matched by three keys gets one copy", "dx", "kc", amqp091.Table{"CC": []any{"kc2", "kc"}, "BCC": []any{"kc"}}, []string{"c"}},
		{"topic", "tx", "news.local", amqp091.Table{"CC": []any{"eu.sport"}, "BCC": []any{"weather.today"}}, []string{"a", "b", "c"}},
		{"default exchange", "", "a", amqp091.Table{"CC": []any{"d", "missing"}}, []string{"a", "d"}},
		{"non-string elements are skipped", "dx", "ka", amqp091.Table{"CC": []any{int32(1), []byte("kb"), "kc"}}, []string{"a", "c"}},
		{"the header names are case-sensitive", "dx", "ka", amqp091.Table{"cc": []any{"kb"}, "Bcc": []any{"kc"}}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			amqptest.PublishMsg(t, ch, tt.exchange, tt.key, amqp091.Publishing{Headers: tt.headers, Body: []byte(tt.name)})
			for _, q := range []string{"a", "b", "c", "d"} {
				bodies := amqptest.GetAll(t, ch, q)
				if !contains(tt.want, q) {
					require.Empty(t, bodies, "queue %s", q)
					continue
				}
				require.Equal(t, []string{tt.name}, bodies, "queue %s gets one copy", q)
			}
		})
	}
	t.Run("BCC is removed before delivery, CC stays", func(t *testing.T) {
		amqptest.PublishMsg(t, ch, "dx", "ka", amqp091.Publishing{
			Headers: amqp091.Table{"CC": []any{"kb"}, "BCC": []any{"kc"}, "other": "kept"}, Body: []byte("x"),
		})
		for _, q := range []string{"a", "b", "c"} {
			d := amqptest.Get(t, ch, q, true)
			require.Equal(t, []any{"kb"}, d.Headers["CC"], "queue %s", q)
			require.Equal(t, "kept", d.Headers["other"], "queue %s", q)
			require.NotContains(t, d.Headers, "BCC", "queue %s", q)
			require.Equal(t, "ka", d.RoutingKey, "the publish's own key is the delivery's")
		}
	})
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// TestSenderSelectedMandatory: a mandatory publish whose own key routes
// nowhere is not returned when a CC or BCC key routes it, and is returned
// when no key does.
func TestSenderSelectedMandatory(t *testing.T) {
	_, _, ch := featureBroker(t)
	amqptest.DeclareQueue(t, ch, "q", false)
	require.NoError(t, ch.Confirm(false))
	returns := ch.NotifyReturn(make(chan amqp091.Return, 2))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 3))
	for _, h := range []amqp091.Table{
		{"CC": []any{"q"}},
		{"BCC": []any{"q"}},
		{"CC": []any{"nowhere"}, "BCC": []any{"neither"}},
	} {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "missing", true, false,
			amqp091.Publishing{Headers: h, Body: []byte("m")}))
	}
	for i := range 3 {
		require.True(t, (<-confirms).Ack, "publish %d", i+1)
	}
	r, ok := amqptest.Receive(t, returns)
	require.True(t, ok)
	require.Equal(t, "missing", r.RoutingKey, "the return names the publish's own key")
	require.Equal(t, []any{"nowhere"}, r.Headers["CC"])
	select {
	case r := <-returns:
		t.Fatalf("only the unroutable publish is returned, also got %+v", r)
	default:
	}
	require.Len(t, amqptest.GetAll(t, ch, "q"), 2)
}

// TestSenderSelectedBadType: a CC or BCC header that is not an array
// closes the channel with RabbitMQ's 406 and enqueues nothing.
func TestSenderSelectedBadType(t *testing.T) {
	b, _, _ := featureBroker(t)
	for _, tc := range []struct {
		name    string
		headers amqp091.Table
		text    string
	}{
		{"CC string", amqp091.Table{"CC": "q"}, `invalid message: {unacceptable_type_in_header,"CC",longstr}`},
		{"BCC table", amqp091.Table{"BCC": amqp091.Table{"q": "q"}}, `invalid message: {unacceptable_type_in_header,"BCC",table}`},
		{"CC checked before BCC", amqp091.Table{"CC": int32(1), "BCC": "q"}, `invalid message: {unacceptable_type_in_header,"CC",signedint}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
			amqptest.DeclareQueue(t, ch, "bad", false)
			errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
			require.NoError(t, ch.PublishWithContext(context.Background(), "", "bad", false, false,
				amqp091.Publishing{Headers: tc.headers, Body: []byte("x")}))
			e := amqptest.AwaitClose(t, errs)
			require.Equal(t, 406, e.Code)
			require.Contains(t, e.Reason, tc.text)
			require.EqualValues(t, 0, queueStats(t, b, "bad").Ready, "nothing was enqueued")
		})
	}
}
