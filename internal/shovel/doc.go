// Package shovel moves messages from a source queue or exchange to a
// destination, as RabbitMQ's dynamic shovels do: it parses and validates
// the value of a "shovel" runtime parameter (Parse, with RabbitMQ 3.10's
// keys, defaults and refusal texts), resolves its URIs (ParseURI: amqp and
// amqps with RabbitMQ's TLS query parameters, and the local "amqp://" with
// no host, which goes through the caller's in-process doors (Local): as
// the user the URI names, or, naming none, through the broker's trusted
// door as its internal user), and runs one link (Worker) over
// github.com/rabbitmq/amqp091-go.
//
// What a Worker promises: in on-confirm mode a source message is acked
// only after the destination confirmed it, so a crash of either end loses
// nothing and redelivers at most the prefetch window; in on-publish mode it
// is acked once published; in no-ack mode the source never waits. After a
// lost connection the Worker waits reconnect-delay and tries again, until
// its context ends or src-delete-after is reached (queue-length: the
// source queue's depth when the link first came up; a number: that many
// messages), when Run returns ErrDone so the owner deletes the parameter.
//
// The package does not store parameters or supervise links; its owner
// (the broker) does, through Parse and Worker.
package shovel
