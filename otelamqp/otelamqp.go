package otelamqp

import (
	"context"
	"maps"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/warrenmq/broker/otelamqp"

// Publisher publishes with a deferred confirm: *amqp091.Channel and
// *broker.Channel both do.
type Publisher interface {
	PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error)
}

// Acknowledger settles one delivery: amqp091.Delivery does, over the
// channel it came from.
type Acknowledger interface {
	Ack(multiple bool) error
	Nack(multiple, requeue bool) error
	Reject(requeue bool) error
}

// Tracer starts the spans and carries the trace context in headers.
// It holds no mutable state: one may be shared by every goroutine.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// New returns a Tracer whose spans come from tp and whose context rides
// in the W3C traceparent and tracestate headers
// (propagation.TraceContext).
func New(tp trace.TracerProvider) *Tracer {
	return &Tracer{tracer: tp.Tracer(ScopeName), prop: propagation.TraceContext{}}
}

// headerCarrier is an amqp091.Table as a propagation.TextMapCarrier. Only
// string values are read: a traceparent of another type is no context.
type headerCarrier amqp091.Table

func (c headerCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c headerCarrier) Set(key, value string) { c[key] = value }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// spanName is "{operation} {destination}", the operation alone for the
// default exchange, as the conventions say when there is no destination
// name.
func spanName(op, destination string) string {
	if destination == "" {
		return op
	}
	return op + " " + destination
}

// messageAttrs are the conventions' attributes of a message.
func messageAttrs(exchange, key, messageID, correlationID string, size int) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemRabbitMQ,
		semconv.MessagingDestinationName(exchange),
		semconv.MessagingMessageBodySize(size),
	}
	if key != "" {
		attrs = append(attrs, semconv.MessagingRabbitMQDestinationRoutingKey(key))
	}
	if messageID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(messageID))
	}
	if correlationID != "" {
		attrs = append(attrs, semconv.MessagingMessageConversationID(correlationID))
	}
	return attrs
}

// Publish publishes msg to exchange with key on ch inside a producer span
// ("publish {exchange}", a child of ctx's span) whose context it writes
// into a copy of msg's headers (traceparent, tracestate; msg itself is
// not changed). On a channel in confirm mode the span ends when the
// broker confirms the message, with an error status when it is nacked
// or the channel closes first; otherwise it ends once the publish is
// written. The returned confirmation is ch's (nil without confirm
// mode), for the caller to wait on as usual.
func (t *Tracer) Publish(ctx context.Context, ch Publisher, exchange, key string, mandatory bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error) {
	ctx, span := t.tracer.Start(ctx, spanName("publish", exchange),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(append(messageAttrs(exchange, key, msg.MessageId, msg.CorrelationId, len(msg.Body)),
			semconv.MessagingOperationName("publish"), semconv.MessagingOperationTypeSend)...))
	headers := amqp091.Table{}
	maps.Copy(headers, msg.Headers)
	t.prop.Inject(ctx, headerCarrier(headers))
	msg.Headers = headers
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false, msg)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "publish failed")
		span.End()
		return dc, err
	}
	if dc == nil {
		span.End()
		return nil, nil
	}
	// The confirm arrives on the channel's own goroutine; this one only
	// waits for it to end the span (Span is safe for concurrent use).
	go func() {
		<-dc.Done()
		if !dc.Acked() {
			span.SetStatus(codes.Error, "nacked")
		}
		span.SetAttributes(attribute.Bool("messaging.rabbitmq.confirm.acked", dc.Acked()))
		span.End()
	}()
	return dc, nil
}

// Delivery is a delivery being processed: its span ends when it is
// settled (Ack, Nack or Reject) or when End is called.
type Delivery struct {
	// Context carries the process span, for the work the delivery
	// causes (a child span, a further Publish).
	Context context.Context
	span    trace.Span
	ack     Acknowledger
}

// Deliver starts the consumer span of d, received from queue:
// "process {exchange}", a child of the publish span whose context d's
// headers carry (a new trace when they carry none), with the delivery's
// attributes. Settle it with the returned Delivery's Ack, Nack or
// Reject, which end the span (deliver to settle); a delivery of a no-ack
// consumer, which needs no settling, ends it with End.
func (t *Tracer) Deliver(ctx context.Context, queue string, d amqp091.Delivery) *Delivery {
	parent := t.prop.Extract(ctx, headerCarrier(d.Headers))
	attrs := append(messageAttrs(d.Exchange, d.RoutingKey, d.MessageId, d.CorrelationId, len(d.Body)),
		semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationSubscriptionName(queue),
		semconv.MessagingRabbitMQMessageDeliveryTag(int(d.DeliveryTag)),
		attribute.Bool("messaging.rabbitmq.redelivered", d.Redelivered),
	)
	if deaths, ok := d.Headers["x-death"].([]any); ok {
		attrs = append(attrs, attribute.Int("messaging.rabbitmq.x_death.count", len(deaths)))
	}
	ctx, span := t.tracer.Start(parent, spanName("process", d.Exchange),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	return &Delivery{Context: ctx, span: span, ack: d}
}

// settled ends the span with the outcome and err.
func (d *Delivery) settled(outcome string, requeue bool, err error) error {
	d.span.AddEvent(outcome, trace.WithAttributes(attribute.Bool("messaging.rabbitmq.requeue", requeue)))
	if err != nil {
		d.span.RecordError(err)
		d.span.SetStatus(codes.Error, outcome+" failed")
	}
	d.span.End()
	return err
}

// Ack acknowledges the delivery and ends its span.
func (d *Delivery) Ack() error { return d.settled("ack", false, d.ack.Ack(false)) }

// Nack negatively acknowledges the delivery (requeued or dead-lettered,
// as requeue says) and ends its span.
func (d *Delivery) Nack(requeue bool) error {
	return d.settled("nack", requeue, d.ack.Nack(false, requeue))
}

// Reject rejects the delivery and ends its span.
func (d *Delivery) Reject(requeue bool) error {
	return d.settled("reject", requeue, d.ack.Reject(requeue))
}

// End ends the span of a delivery that needs no settling (no-ack).
func (d *Delivery) End() { d.span.End() }
