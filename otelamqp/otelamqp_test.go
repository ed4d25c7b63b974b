package otelamqp_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/otelamqp"
)

// recorder is a tracer provider that keeps ended spans in memory.
func recorder(t *testing.T) (*otelamqp.Tracer, *tracetest.InMemoryExporter, trace.Tracer) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return otelamqp.New(tp), exp, tp.Tracer("test")
}

// ended waits until the exporter holds a span named name of kind, ended,
// and returns the newest such.
func ended(t *testing.T, exp *tracetest.InMemoryExporter, name string, kind trace.SpanKind) tracetest.SpanStub {
	t.Helper()
	var got tracetest.SpanStub
	require.Eventually(t, func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == name && s.SpanKind == kind {
				got = s
			}
		}
		return got.Name != ""
	}, 10*time.Second, time.Millisecond, "span %q", name)
	return got
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func events(s tracetest.SpanStub) []string {
	var out []string
	for _, e := range s.Events {
		out = append(out, e.Name)
	}
	return out
}

// TestTraceThroughDeliveryAndAck: one trace from a request's span
// through the publish span (ended at the confirm) to the process span of
// the delivery (ended at the ack), over a real client connection; the
// publisher's headers are left as they were.
func TestTraceThroughDeliveryAndAck(t *testing.T) {
	tr, exp, test := recorder(t)
	b := brokertest.New(t)
	ch := amqptest.ConfirmChannel(t, brokertest.Dial(t, b))
	amqptest.DeclareQueue(t, ch, "work", false)

	ctx, request := test.Start(context.Background(), "request")
	headers := amqp091.Table{"app": "shop"}
	dc, err := tr.Publish(ctx, ch, "", "work", false, amqp091.Publishing{Body: []byte("order"), MessageId: "m-1", CorrelationId: "c-1", Headers: headers})
	require.NoError(t, err)
	require.NotNil(t, dc)
	require.True(t, dc.Wait())
	request.End()
	require.Equal(t, amqp091.Table{"app": "shop"}, headers, "the caller's headers are not changed")

	deliveries, err := ch.Consume("work", "", false, false, false, false, nil)
	require.NoError(t, err)
	d := <-deliveries
	require.Equal(t, "shop", d.Headers["app"])
	require.Contains(t, d.Headers, "traceparent")
	dl := tr.Deliver(context.Background(), "work", d)
	require.True(t, trace.SpanContextFromContext(dl.Context).IsValid())
	require.NoError(t, dl.Ack())

	pub := ended(t, exp, "publish", trace.SpanKindProducer)
	proc := ended(t, exp, "process", trace.SpanKindConsumer)
	req := ended(t, exp, "request", trace.SpanKindInternal)
	require.Equal(t, req.SpanContext.TraceID(), pub.SpanContext.TraceID())
	require.Equal(t, req.SpanContext.SpanID(), pub.Parent.SpanID(), "publish is a child of the request")
	require.Equal(t, pub.SpanContext.TraceID(), proc.SpanContext.TraceID(), "one trace")
	require.Equal(t, pub.SpanContext.SpanID(), proc.Parent.SpanID(), "process is a child of publish")
	require.True(t, proc.Parent.IsRemote(), "the parent came through the headers")
	require.Equal(t, codes.Unset, pub.Status.Code)
	require.True(t, attr(pub, "messaging.rabbitmq.confirm.acked").AsBool())
	require.Equal(t, []string{"ack"}, events(proc))
	for _, c := range []struct {
		span      tracetest.SpanStub
		key, want string
	}{
		{pub, "messaging.system", "rabbitmq"},
		{pub, "messaging.operation.name", "publish"},
		{pub, "messaging.operation.type", "send"},
		{pub, "messaging.destination.name", ""},
		{pub, "messaging.rabbitmq.destination.routing_key", "work"},
		{pub, "messaging.message.id", "m-1"},
		{pub, "messaging.message.conversation_id", "c-1"},
		{proc, "messaging.operation.type", "process"},
		{proc, "messaging.destination.subscription.name", "work"},
		{proc, "messaging.message.id", "m-1"},
	} {
		require.Equal(t, c.want, attr(c.span, c.key).AsString(), "%s %s", c.span.Name, c.key)
	}
	require.Equal(t, int64(5), attr(pub, "messaging.message.body.size").AsInt64())
	require.Equal(t, int64(d.DeliveryTag), attr(proc, "messaging.rabbitmq.message.delivery_tag").AsInt64())
}

// TestDeadLetteredKeepsTrace: a message nacked without requeue is
// dead-lettered with its headers, so its delivery from the dead-letter
// queue is another child of the same publish span, marked with its
// x-death count.
func TestDeadLetteredKeepsTrace(t *testing.T) {
	tr, exp, _ := recorder(t)
	b := brokertest.New(t)
	ch := amqptest.ConfirmChannel(t, brokertest.Dial(t, b))
	amqptest.DeclareQueue(t, ch, "dead", false)
	_, err := ch.QueueDeclare("work", false, false, false, false, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
	require.NoError(t, err)

	dc, err := tr.Publish(context.Background(), ch, "", "work", false, amqp091.Publishing{Body: []byte("bad order")})
	require.NoError(t, err)
	require.True(t, dc.Wait())
	d := amqptest.Get(t, ch, "work", false)
	require.NoError(t, tr.Deliver(context.Background(), "work", d).Nack(false))
	amqptest.Idle(t, b.WaitIdle) // dead-lettered
	dead := amqptest.Get(t, ch, "dead", false)
	require.Contains(t, dead.Headers, "x-death")
	require.NoError(t, tr.Deliver(context.Background(), "dead", dead).Ack())

	pub := ended(t, exp, "publish", trace.SpanKindProducer)
	var procs []tracetest.SpanStub
	require.Eventually(t, func() bool {
		procs = procs[:0]
		for _, s := range exp.GetSpans() {
			if s.Name == "process" {
				procs = append(procs, s)
			}
		}
		return len(procs) == 2
	}, 10*time.Second, time.Millisecond)
	byQueue := map[string]tracetest.SpanStub{}
	for _, p := range procs {
		require.Equal(t, pub.SpanContext.TraceID(), p.SpanContext.TraceID(), "one trace")
		require.Equal(t, pub.SpanContext.SpanID(), p.Parent.SpanID())
		byQueue[attr(p, "messaging.destination.subscription.name").AsString()] = p
	}
	require.Equal(t, []string{"nack"}, events(byQueue["work"]))
	require.Equal(t, []string{"ack"}, events(byQueue["dead"]))
	require.Equal(t, int64(1), attr(byQueue["dead"], "messaging.rabbitmq.x_death.count").AsInt64())
	require.Equal(t, "dead", attr(byQueue["dead"], "messaging.rabbitmq.destination.routing_key").AsString(), "dead-lettered with its new routing key")
}

// TestNackedPublishAndDirectChannel: over the broker's direct Channel a
// publish the queue refuses (x-overflow reject-publish, full) is nacked
// and its span ends with an error status; a message without a
// traceparent (or with one that is not a string) starts a new trace.
func TestNackedPublishAndDirectChannel(t *testing.T) {
	tr, exp, _ := recorder(t)
	b := brokertest.New(t)
	ch := brokertest.Channel(t, b)
	require.NoError(t, ch.Confirm(false))
	_, err := ch.QueueDeclare("full", false, false, false, false, amqp091.Table{"x-max-length": int32(0), "x-overflow": "reject-publish"})
	require.NoError(t, err)
	dc, err := tr.Publish(context.Background(), ch, "amq.direct", "nowhere", false, amqp091.Publishing{Body: []byte("x")})
	require.NoError(t, err)
	require.True(t, dc.Wait(), "unroutable: confirmed")
	require.NoError(t, ch.QueueBind("full", "full", "amq.direct", false, nil))
	dc, err = tr.Publish(context.Background(), ch, "amq.direct", "full", false, amqp091.Publishing{Body: []byte("x")})
	require.NoError(t, err)
	require.False(t, dc.Wait(), "the full queue refuses it")
	// A publish span ends on its own goroutine once the confirm arrives
	// (Tracer.Publish), so the two may end in either order: tell them by
	// routing key.
	require.Eventually(t, func() bool {
		statuses := map[string]codes.Code{}
		for _, s := range exp.GetSpans() {
			if s.Name == "publish amq.direct" {
				statuses[attr(s, "messaging.rabbitmq.destination.routing_key").AsString()] = s.Status.Code
			}
		}
		return len(statuses) == 2 && statuses["nowhere"] == codes.Unset && statuses["full"] == codes.Error
	}, 10*time.Second, time.Millisecond, "the confirmed publish ends well, the nacked one in error")

	for _, headers := range []amqp091.Table{nil, {"traceparent": int32(7)}, {"traceparent": "garbage"}} {
		dl := tr.Deliver(context.Background(), "q", amqp091.Delivery{Headers: headers, Acknowledger: nopAck{}})
		sc := trace.SpanContextFromContext(dl.Context)
		require.True(t, sc.IsValid())
		require.NoError(t, dl.Reject(false))
		s := ended(t, exp, "process", trace.SpanKindConsumer)
		require.False(t, s.Parent.IsValid(), "a new trace for headers %v", headers)
	}
}

// nopAck settles nothing.
type nopAck struct{}

func (nopAck) Ack(uint64, bool) error        { return nil }
func (nopAck) Nack(uint64, bool, bool) error { return nil }
func (nopAck) Reject(uint64, bool) error     { return nil }

// TestBrokerDoesNotLinkOTel: the broker package and the server command
// do not depend on OpenTelemetry; only importing this package does.
func TestBrokerDoesNotLinkOTel(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/warrenmq/broker", "github.com/warrenmq/broker/cmd/warren").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), "go.opentelemetry.io")
	require.Contains(t, string(out), "github.com/warrenmq/broker\n")
}
