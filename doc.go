// Package broker is Warren, an AMQP 0-9-1 broker (RabbitMQ-compatible) that a
// Go program embeds.
//
// New builds a broker from Options; the zero Options value works: everything
// in memory, one user guest/guest (tagged administrator), one virtual host
// "/", RabbitMQ's defaults for channel-max (2047), frame-max (131072) and
// heartbeat (60 s), no logging. Options.DataDir selects Pebble for durable
// state; Options.Storage.Meta, Shards and Unacked plug in other stores (see the
// storagetest and metatest conformance suites, and examples/countingstore).
// New copies the Options, so the caller's struct is never changed and may be
// reused, and refuses Options that could never work or would lose data
// (in-memory stores beside DataDir, a user without a password, a connection
// limit on an unknown vhost); in limits, 0 is the default and -1 means no
// limit. A full disk under DataDir is a disk alarm, never a crash: see
// alarms.go and storage/pebble's DiskReserve.
//
// # Three doors, one broker
//
// Every door runs the same session code (internal/session), so semantics,
// reply codes and error texts are identical.
//
// TCP, for any AMQP 0-9-1 client in any language: Listen binds and serves
// in the background (Addr and URL are valid when it returns);
// ListenAndServe and Serve block like their net/http namesakes.
//
//	b, err := broker.New(broker.Options{})
//	if err != nil { ... }
//	defer b.Close()
//	if _, err := b.Listen("127.0.0.1:0"); err != nil { ... }
//	conn, err := amqp091.Dial(b.URL())
//
// Dial, the wire protocol without a socket: it hands out the client end of
// an in-memory connection served exactly like a TCP one, and fits
// amqp091.Config.Dial.
//
//	conn, err := amqp091.DialConfig(b.URL(), amqp091.Config{Dial: b.Dial})
//
// Channel, the direct API, with no frames at all. A *Channel has every
// method of *amqp091.Channel, with the same names and signatures, and uses
// amqp091-go's types (Publishing, Delivery, Table, Queue, Confirmation,
// Return, *DeferredConfirmation, *Error), so an application interface over
// those methods accepts either (a test over the whole method set keeps it
// so).
//
//	ch, err := b.Channel(ctx)
//	if err != nil { ... }
//	defer ch.Close()
//	_, err = ch.QueueDeclare("jobs", true, false, false, false, nil)
//	err = ch.PublishWithContext(ctx, "", "jobs", false, false, amqp091.Publishing{Body: []byte("hi")})
//	msgs, err := ch.Consume("jobs", "", false, false, false, false, nil)
//	d := <-msgs
//	err = d.Ack(false)
//
// A Channel is its own in-process connection with one channel: exclusive
// queues it declares are deleted when it closes. Errors are *amqp091.Error
// with the code the wire would carry (404, 406, ...), and a method that
// causes a channel exception returns it even where amqp091-go can only
// report it later (publish, ack); NotifyClose hears it in both. See Channel
// for the details.
//
// b.Channel(ctx) is the program's own channel: the default vhost, no
// permission checks. To act for one of the broker's users, name the user
// and the vhost; that user's permissions are then enforced as over AMQP:
//
//	ch, err := b.Channel(ctx, broker.AsUser("alice"), broker.OnVHost("orders"))
//
// For tests, package brokertest gives each test its own broker (listening
// on 127.0.0.1:0 and closed by t.Cleanup), amqp091-go dialled through Dial,
// and direct channels; a broker is cheap to start and small when idle
// (BenchmarkStartupBrokertestDial and BenchmarkIdleBrokerMemory measure
// both), so every test can have one.
//
// # Close
//
// Close stops accepting, sends connection.close 320 CONNECTION_FORCED on
// every open connection (direct Channels receive the same error through
// NotifyClose), waits briefly for each close-ok, and returns only after
// every goroutine the broker started has exited. It is idempotent and safe
// to call from many goroutines at once; every caller returns once shutdown
// is complete.
//
// Shutdown(ctx) is the graceful way, as net/http's Server.Shutdown: it
// refuses new connections and publishes (a publishing connection is closed
// with 320), delivers nothing new, waits until consumers settled what they
// hold (or ctx ends), then calls Close (drain.go).
//
// # Events
//
// Events(ctx, buffer, kinds...) is a channel of what happens in the
// broker, for a program that observes it without polling: connections
// created and closed (direct Channels included, as RabbitMQ's direct
// connections), consumers created and deleted, messages returned,
// dead-lettered and expired, named as RabbitMQ's event exchange names them
// (connection.created, ...). The channel is closed when ctx ends or the
// broker closes. The broker never waits for a subscriber: an event that
// finds its buffer full is dropped for that subscriber and counted in the
// Missed field of the next one it gets; with no subscriber an event costs
// one atomic load (events.go, docs/events.md).
//
// # Shared mode
//
// When Options.Storage.Meta implements meta.ChangeFeed (a cluster's replicated
// store does), several brokers share the stores and any of them serves any
// durable queue: consumers and basic.get on every broker claim from the
// queue's shared cursor (through unacked.Claimer, which Options.Storage.Unacked
// must implement; Options.Storage.Shards must be the shared message store), a
// publish on any broker reaches consumers on all of them, and a message
// requeued on one may be delivered by another. Each broker follows the
// others' changes on one goroutine (started by New, stopped by Close):
// topology (exchanges, durable queues, bindings, vhosts) comes from the
// store, a queue deleted elsewhere cancels its consumers here with
// basic.cancel, and appends, cursor moves and requeues reach the queues'
// actors. Non-durable and exclusive queues stay on the broker that
// declared them. At start nothing another broker may own is deleted as
// left by an earlier run, and transient messages of durable queues are
// kept. Give each broker its own Options.Node. Every broker's unacked
// scanner enforces the consumer timeout on its own deliveries; the meta
// leader's also returns the unsettled deliveries of another broker once
// it is known dead (package cluster tells the broker which are alive).
//
// Direct reply-to requesters live on their broker's connections, so
// the members of a cluster pass replies to each other (package cluster
// attaches the forwarder): reply names then carry the broker's tag, and a
// reply to another broker's name goes to that broker's requester.
//
// # Concurrency
//
// All methods of *Broker and *Channel are safe for concurrent use.
package broker
