// Package otelamqp traces messages through Warren with OpenTelemetry: the
// W3C trace context (the traceparent and tracestate headers) rides in
// each message's AMQP headers from publish, through routing and
// dead-lettering (the broker keeps a message's headers, as RabbitMQ
// does, and adds x-death beside them), to each delivery; a span covers
// publish to confirm and another delivery to ack, nack or reject,
// following OpenTelemetry's messaging semantic conventions (semconv
// v1.43.0: messaging.system rabbitmq, span names "{operation}
// {destination}").
//
// It works over the broker's direct Channel (broker.Channel) and over
// amqp091-go's *amqp091.Channel alike, so it traces clients on either
// side of the wire. It is its own package so that a program that does
// not import it does not link OpenTelemetry.
//
// What it promises: the publish span is the parent of every process
// span of that message, in every queue it reaches, dead-letter queues
// included; a message published without it, or whose headers carry no
// valid traceparent, gets a process span in a new trace. It does not
// trace the broker's own steps (routing inside the broker has no span).
package otelamqp
