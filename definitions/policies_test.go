package definitions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/amqptest"
)

// brokerFromFile imports the definitions file at path into a new in-memory
// broker, closed when the test ends.
func brokerFromFile(t *testing.T, path string) *broker.Broker {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	d, err := definitions.Read(bytes.NewReader(raw))
	require.NoError(t, err)
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	require.NoError(t, b.Admin().Import(context.Background(), d))
	return b
}

// publishInvoices publishes, as guest in vhost billing, three invoices to
// the queue invoices and one payment nobody is bound for, and returns
// every queue's ready count by vhost/name once the broker is idle.
func publishInvoices(t *testing.T, b *broker.Broker) map[string]uint64 {
	t.Helper()
	conn, err := amqp091.DialConfig("amqp://guest:guest@127.0.0.1/billing", amqp091.Config{Dial: b.Dial, Vhost: "billing"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch := amqptest.ConfirmChannel(t, conn)
	for _, body := range []string{"1", "2", "3"} {
		amqptest.Publish(t, ch, "", "invoices", body)
	}
	amqptest.Publish(t, ch, "payments", "nobody", "lost")
	require.NoError(t, b.WaitIdle(context.Background()))
	ready := map[string]uint64{}
	for _, q := range b.Stats(context.Background()).QueueDetails {
		ready[q.VHost+"/"+q.Name] = q.Ready
	}
	return ready
}

// TestImportRabbitMQPolicies imports a RabbitMQ 4.1 export with policies
// and an operator policy (exported, as RabbitMQ does, as a parameter of
// component operator_policy): they apply to the imported queues and
// exchanges, and an export carries them the same way.
func TestImportRabbitMQPolicies(t *testing.T) {
	b := brokerFromFile(t, "testdata/rabbitmq-4.1-policies.json")
	ctx := context.Background()

	ps, err := b.Admin().ListPolicies(ctx, "")
	require.NoError(t, err)
	require.Len(t, ps, 3)
	ops, err := b.Admin().ListOperatorPolicies(ctx, "billing")
	require.NoError(t, err)
	require.Equal(t, []broker.Policy{{VHost: "billing", Name: "guardrails", Pattern: "^invoices", ApplyTo: "queues",
		Definition: map[string]any{"max-length": int64(2), "expires": int64(3600000)}}}, ops)

	ready := publishInvoices(t, b)
	// The operator's max-length 2 beats the policy's 10; the oldest goes
	// to the policy's dead-letter queue; the alternate exchange from the
	// policy takes the unroutable payment.
	require.Equal(t, map[string]uint64{"billing/invoices": 2, "billing/invoices.dead": 1, "billing/unrouted": 1}, ready)

	out, err := b.Admin().Export(ctx)
	require.NoError(t, err)
	require.Len(t, out.Policies, 3)
	require.Len(t, out.Parameters, 1)
	raw, err := json.Marshal(out.Parameters[0])
	require.NoError(t, err)
	var param map[string]any
	require.NoError(t, json.Unmarshal(raw, &param))
	require.Equal(t, "operator_policy", param["component"])
	require.Equal(t, "guardrails", param["name"])

	// The export imports into a fresh broker.
	var buf bytes.Buffer
	require.NoError(t, json.NewEncoder(&buf).Encode(out))
	again, err := definitions.Read(&buf)
	require.NoError(t, err)
	b2, err := broker.New(broker.Options{})
	require.NoError(t, err)
	defer b2.Close()
	require.NoError(t, b2.Admin().Import(ctx, again))
	ops2, err := b2.Admin().ListOperatorPolicies(ctx, "")
	require.NoError(t, err)
	require.Equal(t, ops, ops2)
}

// TestImportRabbitMQ3Policies: a RabbitMQ 3.x export's classic mirroring
// keys (removed in 4.0) are dropped on import; a policy with nothing else
// is not imported, one with other keys keeps them.
func TestImportRabbitMQ3Policies(t *testing.T) {
	d := &definitions.File{
		VHosts: []definitions.VHost{{Name: "/"}},
		Policies: []definitions.Policy{
			{VHost: "/", Name: "ha-all", Pattern: "^(?!amq\\.).*", ApplyTo: "all", Definition: map[string]any{"ha-mode": "all", "ha-sync-mode": "automatic"}},
			{VHost: "/", Name: "ha-ttl", Pattern: "^ttl", ApplyTo: "queues", Priority: 1, Definition: map[string]any{"ha-mode": "exactly", "ha-params": int64(2), "message-ttl": int64(1000)}},
		},
	}
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	require.NoError(t, b.Admin().Import(ctx, d))
	ps, err := b.Admin().ListPolicies(ctx, "/")
	require.NoError(t, err)
	require.Equal(t, []broker.Policy{{VHost: "/", Name: "ha-ttl", Pattern: "^ttl", ApplyTo: "queues", Priority: 1, Definition: map[string]any{"message-ttl": int64(1000)}}}, ps)
	// Set directly, RabbitMQ 4.x refuses them.
	err = b.Admin().PutPolicy(ctx, broker.Policy{Name: "ha", Pattern: ".", Definition: map[string]any{"ha-mode": "all"}})
	require.ErrorContains(t, err, "are not recognised policy settings")
}

// TestImportRabbitMQ3108Export imports a file that RabbitMQ 3.10.8 (Debian
// bookworm's rabbitmq-server) wrote with `rabbitmqctl export_definitions`,
// byte for byte: policies (one with a classic mirroring key), an operator
// policy as RabbitMQ exports it (a parameter of component operator_policy
// whose definition is a list of pairs), queues, exchanges and a binding.
// The policies apply as they did on RabbitMQ: the operator policy's
// max-length 2 beats the policy's 10, the policy's dead-lettering takes the
// overflow, and its alternate exchange the unroutable publish.
func TestImportRabbitMQ3108Export(t *testing.T) {
	b := brokerFromFile(t, "testdata/rabbitmq-3.10.8-policies.json")
	ctx := context.Background()

	ps, err := b.Admin().ListPolicies(ctx, "")
	require.NoError(t, err)
	byName := map[string]broker.Policy{}
	for _, p := range ps {
		byName[p.Name] = p
	}
	require.Len(t, byName, 3)
	require.Equal(t, map[string]any{"message-ttl": int64(60000)}, byName["ha-ttl"].Definition, "ha-mode dropped, the rest kept")
	require.Equal(t, broker.Policy{VHost: "billing", Name: "invoices-dlx", Pattern: "^invoices$", ApplyTo: "queues", Priority: 1,
		Definition: map[string]any{"dead-letter-exchange": "", "dead-letter-routing-key": "invoices.dead", "max-length": int64(10)}}, byName["invoices-dlx"])
	ops, err := b.Admin().ListOperatorPolicies(ctx, "billing")
	require.NoError(t, err)
	require.Equal(t, []broker.Policy{{VHost: "billing", Name: "guardrails", Pattern: "^invoices", ApplyTo: "queues",
		Definition: map[string]any{"max-length": int64(2), "expires": int64(3600000)}}}, ops)

	ready := publishInvoices(t, b) // as guest: the exported guest hash logs in
	require.Equal(t, map[string]uint64{"billing/invoices": 2, "billing/invoices.dead": 1, "billing/unrouted-q": 1, "//ttl.q": 0}, ready)
}
