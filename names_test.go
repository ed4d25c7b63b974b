package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/amqptest"
)

// Control characters in names, as RabbitMQ treats them (observed on
// RabbitMQ 3.10.8; rabbit_channel is the same in 4.x): CR and LF are
// removed from the queue and exchange names of the declares, deletes and
// binds (strip_cr_lf), nothing else is; every other byte, NUL included,
// is kept; and the other methods look names up as sent.

// nameDoors are the three AMQP doors, which must all do it.
var nameDoors = []struct {
	name string
	open func(t *testing.T, b *broker.Broker) func() parityChannel
}{
	{"amqp091 over TCP", func(t *testing.T, b *broker.Broker) func() parityChannel {
		conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
		return func() parityChannel { return amqptest.Channel(t, conn) }
	}},
	{"amqp091 over Broker.Dial", func(t *testing.T, b *broker.Broker) func() parityChannel {
		conn := brokertest.Dial(t, b)
		return func() parityChannel { return amqptest.Channel(t, conn) }
	}},
	{"direct Channel", func(t *testing.T, b *broker.Broker) func() parityChannel {
		return func() parityChannel { return brokertest.Channel(t, b) }
	}},
}

// nameStep is one method and what RabbitMQ answers it: "ok" and what
// the step reports, or the reply code and text.
type nameStep struct {
	what string
	do   func(ctx context.Context, ch parityChannel) (string, error)
	want string
}

func declareQueue(name string) func(context.Context, parityChannel) (string, error) {
	return func(_ context.Context, ch parityChannel) (string, error) {
		q, err := ch.QueueDeclare(name, false, false, false, false, nil)
		if strings.HasPrefix(q.Name, "amq.gen-") {
			return "server-named", err
		}
		return fmt.Sprintf("%q", q.Name), err
	}
}

func passiveQueue(name string) func(context.Context, parityChannel) (string, error) {
	return func(_ context.Context, ch parityChannel) (string, error) {
		q, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
		return fmt.Sprintf("%q holds %d", q.Name, q.Messages), err
	}
}

func declareExchange(name string) func(context.Context, parityChannel) (string, error) {
	return func(_ context.Context, ch parityChannel) (string, error) {
		return "", ch.ExchangeDeclare(name, "direct", false, false, false, false, nil)
	}
}

func passiveExchange(name string) func(context.Context, parityChannel) (string, error) {
	return func(_ context.Context, ch parityChannel) (string, error) {
		return "", ch.ExchangeDeclarePassive(name, "direct", false, false, false, false, nil)
	}
}

var nameSteps = []nameStep{
	{"queue.declare with CR LF", declareQueue("a\r\nb"), `ok "ab"`},
	{"queue.declare with CR", declareQueue("c\rd"), `ok "cd"`},
	{"passive queue.declare with LF", passiveQueue("a\nb"), `ok "ab" holds 0`},
	{"queue.declare with NUL", declareQueue("a\x00b"), `ok "a\x00b"`},
	{"queue.declare with TAB, SOH, DEL", declareQueue("a\t\x01\x7fb"), `ok "a\t\x01\x7fb"`},
	{"queue.declare of CR LF only", declareQueue("\r\n"), "ok server-named"},
	{"passive queue.declare of CR LF only", passiveQueue("\r\n"), "404 NOT_FOUND - no queue '' in vhost '/'"},
	{"queue.declare amq. with LF", declareQueue("amq.\nx"), "403 ACCESS_REFUSED - queue name 'amq.x' contains reserved prefix 'amq.*'"},
	{"exchange.declare with CR LF", declareExchange("e\r\nx"), "ok "},
	{"passive exchange.declare stripped", passiveExchange("ex"), "ok "},
	{"passive exchange.declare with LF", passiveExchange("e\nx"), "ok "},
	{"passive exchange.declare as sent", passiveExchange("e\r\nx"), "ok "},
	{"exchange.declare of CR LF only", declareExchange("\r\n"), "403 ACCESS_REFUSED - operation not permitted on the default exchange"},
	{"exchange.declare amq. with CR LF", declareExchange("amq.\r\nx"), "403 ACCESS_REFUSED - exchange name 'amq.x' contains reserved prefix 'amq.*'"},
	{"exchange.declare with NUL", declareExchange("e\x00x"), "ok "},
	{"passive exchange.declare with NUL", passiveExchange("e\x00x"), "ok "},
	{"queue.bind with CR LF in both names", func(_ context.Context, ch parityChannel) (string, error) {
		return "", ch.QueueBind("a\r\nb", "k", "e\nx", false, nil)
	}, "ok "},
	{"publish to the stripped exchange", func(ctx context.Context, ch parityChannel) (string, error) {
		return "", ch.PublishWithContext(ctx, "ex", "k", false, false, amqp091.Publishing{Body: []byte("m")})
	}, "ok "},
	{"the message is in the stripped queue", passiveQueue("ab"), `ok "ab" holds 1`},
	{"queue.unbind with CR LF", func(_ context.Context, ch parityChannel) (string, error) {
		return "", ch.QueueUnbind("a\nb", "k", "e\r\nx", nil)
	}, "ok "},
	{"exchange.declare f with LF", declareExchange("f\nx"), "ok "},
	{"exchange.bind with CR LF", func(_ context.Context, ch parityChannel) (string, error) {
		return "", ch.ExchangeBind("f\r\nx", "k", "e\nx", false, nil)
	}, "ok "},
	{"exchange.unbind stripped", func(_ context.Context, ch parityChannel) (string, error) {
		return "", ch.ExchangeUnbind("fx", "k", "ex", false, nil)
	}, "ok "},
	{"queue.bind to CR LF only", func(_ context.Context, ch parityChannel) (string, error) {
		return "", ch.QueueBind("ab", "k", "\r\n", false, nil)
	}, "403 ACCESS_REFUSED - operation not permitted on the default exchange"},
	{"basic.get takes the name as sent", func(_ context.Context, ch parityChannel) (string, error) {
		_, _, err := ch.Get("a\r\nb", false)
		return "", err
	}, "404 NOT_FOUND - no queue 'a\r\nb' in vhost '/'"},
	{"queue.purge takes the name as sent", func(_ context.Context, ch parityChannel) (string, error) {
		_, err := ch.QueuePurge("a\nb", false)
		return "", err
	}, "404 NOT_FOUND - no queue 'a\nb' in vhost '/'"},
	{"basic.consume takes the name as sent", func(_ context.Context, ch parityChannel) (string, error) {
		_, err := ch.Consume("a\r\nb", "", false, false, false, false, nil)
		return "", err
	}, "404 NOT_FOUND - no queue 'a\r\nb' in vhost '/'"},
	{"basic.get with NUL", func(_ context.Context, ch parityChannel) (string, error) {
		_, ok, err := ch.Get("a\x00b", false)
		return fmt.Sprint(ok), err
	}, "ok false"},
	{"queue.delete with CR LF", func(_ context.Context, ch parityChannel) (string, error) {
		n, err := ch.QueueDelete("a\r\nb", false, false, false)
		return fmt.Sprint(n), err
	}, "ok 1"},
	{"the stripped queue is gone", passiveQueue("ab"), "404 NOT_FOUND - no queue 'ab' in vhost '/'"},
	{"exchange.delete with CR LF", func(_ context.Context, ch parityChannel) (string, error) {
		return "", ch.ExchangeDelete("e\r\nx", false, false)
	}, "ok "},
	{"the stripped exchange is gone", passiveExchange("ex"), "404 NOT_FOUND - no exchange 'ex' in vhost '/'"},
	{"exchange.delete of CR LF only", func(_ context.Context, ch parityChannel) (string, error) {
		return "", ch.ExchangeDelete("\n", false, false)
	}, "403 ACCESS_REFUSED - operation not permitted on the default exchange"},
	{"publish to a name with CR LF", func(ctx context.Context, ch parityChannel) (string, error) {
		// The channel's close says why, on every door (the direct
		// Channel also returns it from the publish).
		closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
		_ = ch.PublishWithContext(ctx, "f\r\nx", "", false, false, amqp091.Publishing{})
		select {
		case err := <-closes:
			if err == nil {
				return "closed without an error", nil
			}
			return "", err
		case <-time.After(amqptest.Timeout):
			return "open", nil
		}
	}, "404 NOT_FOUND - no exchange 'f\r\nx' in vhost '/'"},
}

// TestNamesControlCharactersAMQP runs nameSteps through each AMQP door on
// a fresh broker.
func TestNamesControlCharactersAMQP(t *testing.T) {
	for _, door := range nameDoors {
		t.Run(door.name, func(t *testing.T) {
			open := door.open(t, startBroker(t, broker.Options{}))
			ch := open()
			for _, step := range nameSteps {
				got, err := step.do(t.Context(), ch)
				if err != nil {
					var ae *amqp091.Error
					require.ErrorAs(t, err, &ae, step.what)
					got = fmt.Sprintf("%d %s", ae.Code, ae.Reason)
					ch = open()
				} else {
					got = "ok " + got
				}
				require.Equal(t, step.want, got, step.what)
			}
		})
	}
}

// TestNamesControlCharactersManagement: the management API declares and
// binds through the AMQP methods' rules (RabbitMQ's direct_request runs
// rabbit_channel), so CR and LF go there too; its lookups (GET, DELETE)
// take the name as sent. Users and vhosts keep every byte.
func TestNamesControlCharactersManagement(t *testing.T) {
	b := startBroker(t, broker.Options{Users: []broker.User{{Name: "guest", Password: "guest", Tags: []string{"administrator"}}}})
	api := amqptest.NewAPI(t, b.ManagementHandler())
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		reason       string
	}{
		{"PUT", "/api/queues/%2F/mq%0D%0Ax", map[string]any{}, http.StatusCreated, ""},
		{"GET", "/api/queues/%2F/mqx", nil, http.StatusOK, ""},
		{"GET", "/api/queues/%2F/mq%0D%0Ax", nil, http.StatusNotFound, ""},
		{"PUT", "/api/queues/%2F/mq%0D%0Ax", map[string]any{"durable": true}, http.StatusBadRequest, "inequivalent arg 'durable' for queue 'mqx' in vhost '/': received 'true' but current is 'false'"},
		{"PUT", "/api/queues/%2F/mq%00x", map[string]any{}, http.StatusCreated, ""},
		{"GET", "/api/queues/%2F/mq%00x", nil, http.StatusOK, ""},
		{"PUT", "/api/queues/%2F/amq.%0Ax", map[string]any{}, http.StatusUnauthorized, "queue name 'amq.x' contains reserved prefix 'amq.*'"},
		{"PUT", "/api/exchanges/%2F/me%0D%0Ax", map[string]any{"type": "direct"}, http.StatusCreated, ""},
		{"GET", "/api/exchanges/%2F/mex", nil, http.StatusOK, ""},
		{"GET", "/api/exchanges/%2F/me%0D%0Ax", nil, http.StatusNotFound, ""},
		{"PUT", "/api/exchanges/%2F/%0D%0A", map[string]any{"type": "direct"}, http.StatusUnauthorized, "operation not permitted on the default exchange"},
		{"PUT", "/api/exchanges/%2F/amq.%0D%0Ax", map[string]any{"type": "direct"}, http.StatusUnauthorized, "exchange name 'amq.x' contains reserved prefix 'amq.*'"},
		{"POST", "/api/bindings/%2F/e/me%0D%0Ax/q/mq%0D%0Ax", map[string]any{"routing_key": "k\r\nk"}, http.StatusCreated, ""},
		{"GET", "/api/bindings/%2F/e/mex/q/mqx/k%250D%250Ak", nil, http.StatusOK, ""},
		{"DELETE", "/api/queues/%2F/mq%0D%0Ax", nil, http.StatusNotFound, ""},
		{"DELETE", "/api/queues/%2F/mqx", nil, http.StatusNoContent, ""},
		{"PUT", "/api/users/mu%0D%0Ax", map[string]any{"password": "pw", "tags": ""}, http.StatusCreated, ""},
		{"PUT", "/api/users/mu%00x", map[string]any{"password": "pw", "tags": ""}, http.StatusCreated, ""},
		{"GET", "/api/users/mu%0D%0Ax", nil, http.StatusOK, ""},
		{"PUT", "/api/vhosts/mv%0D%0Ax", map[string]any{}, http.StatusCreated, ""},
		{"PUT", "/api/vhosts/mv%00x", map[string]any{}, http.StatusCreated, ""},
		{"GET", "/api/vhosts/mv%00x", nil, http.StatusOK, ""},
	} {
		status, _, body := api.Do(tc.method, tc.path, "guest", tc.body)
		require.Equal(t, tc.status, status, "%s %s: %s", tc.method, tc.path, body)
		if tc.reason != "" {
			_, reason := amqptest.ErrorBody(t, body)
			require.Equal(t, tc.reason, reason, "%s %s", tc.method, tc.path)
		}
	}
	// A queue named by CR LF alone is a server-named one.
	status, _, body := api.Do("PUT", "/api/queues/%2F/%0D%0A", "guest", map[string]any{})
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var queues []string
	for _, q := range api.Get("/api/queues").([]any) {
		queues = append(queues, q.(map[string]any)["name"].(string))
	}
	require.Contains(t, queues, "mq\x00x")
	require.True(t, slices.ContainsFunc(queues, func(q string) bool { return strings.HasPrefix(q, "amq.gen-") }), "%q", queues)
	d, err := b.Admin().Export(t.Context())
	require.NoError(t, err)
	require.Subset(t, names(d.Users, func(u definitions.User) string { return u.Name }), []string{"mu\r\nx", "mu\x00x"})
	require.Subset(t, names(d.VHosts, func(v definitions.VHost) string { return v.Name }), []string{"mv\r\nx", "mv\x00x"})
}

// TestNamesControlCharactersDefinitions: a definitions import takes every
// name as written, CR and LF included (RabbitMQ's rabbit_definitions
// declares without rabbit_channel), as do the embedding API's users and
// vhosts.
func TestNamesControlCharactersDefinitions(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ctx := context.Background()
	d, err := definitions.Read(strings.NewReader(`{
		"users": [{"name": "du\r\nx", "password_hash": "", "tags": ""}, {"name": "du\u0000x", "password_hash": "", "tags": ""}],
		"vhosts": [{"name": "dv\r\nx"}, {"name": "dv\u0000x"}],
		"queues": [{"name": "dq\r\nx", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {}},
		           {"name": "dq\u0000x", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {}}],
		"exchanges": [{"name": "de\r\nx", "vhost": "/", "type": "direct", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}],
		"bindings": [{"source": "de\r\nx", "vhost": "/", "destination": "dq\r\nx", "destination_type": "queue", "routing_key": "r", "arguments": {}}]
	}`))
	require.NoError(t, err)
	require.NoError(t, b.Admin().Import(ctx, d))
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "au\r\nx", Password: "pw"}))
	addVHost(t, b, "av\x00x")
	out, err := b.Admin().Export(ctx)
	require.NoError(t, err)
	require.Subset(t, names(out.Queues, func(q definitions.Queue) string { return q.Name }), []string{"dq\r\nx", "dq\x00x"})
	require.Contains(t, names(out.Exchanges, func(x definitions.Exchange) string { return x.Name }), "de\r\nx")
	require.Subset(t, names(out.Users, func(u definitions.User) string { return u.Name }), []string{"du\r\nx", "du\x00x", "au\r\nx"})
	require.Subset(t, names(out.VHosts, func(v definitions.VHost) string { return v.Name }), []string{"dv\r\nx", "dv\x00x", "av\x00x"})
	// The imported queue is reached by the methods that take names as
	// sent, and not by a declare, which strips (as in RabbitMQ).
	ch := brokertest.Channel(t, b)
	require.NoError(t, ch.PublishWithContext(ctx, "de\r\nx", "r", false, false, amqp091.Publishing{Body: []byte("m")}))
	amqptest.Idle(t, b.WaitIdle)
	_, ok, err := ch.Get("dq\r\nx", true)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = ch.QueueDeclarePassive("dq\r\nx", true, false, false, false, nil)
	var ae *amqp091.Error
	require.True(t, errors.As(err, &ae))
	require.Equal(t, "NOT_FOUND - no queue 'dqx' in vhost '/'", ae.Reason)
}

func names[T any](list []T, name func(T) string) []string {
	out := make([]string, 0, len(list))
	for _, v := range list {
		out = append(out, name(v))
	}
	return out
}
