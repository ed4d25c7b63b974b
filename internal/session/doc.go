// Package session is the server side of AMQP 0-9-1 connections and
// channels: frames in, broker operations and replies out. It is the
// protocol's state machine; the stream under it is internal/transport's.
//
// A Conn serves one connection over a transport.Conn, which reads frames
// and writes batches of encoded frames: NewConn takes any
// io.ReadWriteCloser (a TCP socket, a transport.Pipe end for Broker.Dial) and
// wraps it with transport.New; NewConnOn takes a transport of the caller's,
// so a test drives the protocol with frames in memory and no socket.
// Both build it from a Config shared by all connections; Serve runs it on
// the caller's goroutine plus a writer goroutine while there is something
// to write, and returns only after both stopped and the stream is closed.
// Shutdown (any goroutine) closes it from the server side.
//
// # Goroutines and ownership
//
// The reader goroutine (the one in Serve) owns the connection and channel
// state: handshake, channel table, content assembly. The writer goroutine
// owns the stream's write side while it runs: a producer that queues frames
// when nobody is flushing claims the outbox's flushing flag and starts it,
// and it exits when it finds the outbox empty, so an idle connection keeps
// one goroutine, its reader parked in the poller, and a busy one keeps its
// writer, which finds the next batch queued while it wrote the last. Producers (the reader; later, queue actors
// delivering messages) encode frames straight into the outbox (a
// mutex-guarded []byte) with sendMethod and sendContent and poke the writer,
// which swaps the buffer and writes the whole batch with one Write: frames
// batch under load and are flushed as soon as the queue drains. All frames
// of one content message are appended under one lock, so messages of
// different channels never interleave. The outbox is the session's, not
// the transport's, because what it holds is protocol: its bound is the
// back-pressure queues and the reader obey (hasRoom, waitForRoom), its
// heartbeats depend on what was written, and a direct connection's Sink
// takes its place. One exception saves a goroutine hand-off per basic.get
// over TCP: when the writer is idle, the reader queues the get reply
// without poking the writer and writes it itself (queueContent, flushNow)
// when the transport allows it (transport.InPlaceWriter); a flushing flag
// in the outbox keeps the two from ever writing at once. With the queue's
// own in-place Get and AckGot, a get round trip wakes no goroutine but the
// reader. A queue delivering to a consumer queues each delivery without
// poking and pokes once after its batch (queue.Flusher), so a batch goes
// out in one write; a batch of one delivery, and the confirms of a stored
// batch, on a TCP connection that is idle (nobody flushing, nothing
// written within busyWindow) the queue's goroutine writes itself with a
// send that never waits (flushQueued), leaving what the socket does not
// take to the writer, so at a low rate a delivery or confirm wakes no
// goroutine of the connection; the writer writes batches of rawWriteMin bytes or more
// in place too (they only build up under load), small ones through the
// runtime's syscall path, which suits a connection at a low rate. Timers
// (handshake timeout, close-ok timeout) are time.AfterFunc callbacks that
// take the outbox lock, never block, and are stopped before Serve returns;
// heartbeats are ticked by the shared schedule (see Heartbeats).
//
// # Handshake
//
// A wrong protocol header gets "AMQP 0 0 9 1" back and the stream closes
// (after our bytes are flushed). connection.start advertises product
// Warren, platform Go, mechanisms PLAIN and AMQPLAIN, and the capabilities
// from the one table in config.go (only implemented extensions are set).
// start-ok is checked with Config.Login (the broker's: stored password
// hashes, loopback-only guest, EXTERNAL over TLS), or the
// simpler Config.Authenticate; connection.open with Config.Open (vhost
// permissions, connection limits). Topic permissions (Access.SetTopics,
// topicauth.go) are checked on basic.publish to, and on binds and unbinds
// with, a topic exchange, 403 ACCESS_REFUSED as RabbitMQ's topic
// authorisation refuses. A refusal is connection.close
// 403 ACCESS_REFUSED (authentication_failure_close), a malformed response 502,
// an unknown mechanism 503; a Login that cannot decide (its user store did
// not answer) closes with the error it returns (the broker's: 320). A
// refused login is logged at WARN with its reason ("invalid credentials"
// when the client is told nothing more) and the user name cut to 255 bytes
// (LogName). tune proposes Config's channel-max, frame-max and
// heartbeat (RabbitMQ's 2047, 131072, 60 s by default). tune-ok is checked as
// RabbitMQ does: a frame-max below 4096, or a frame-max or channel-max above
// the server's (or 0, "unlimited", while the server has a limit) is 530
// NOT_ALLOWED; the heartbeat is the client's choice, 0 disabling it.
// connection.open of a vhost Config.VHostExists rejects is 530 NOT_ALLOWED.
// The whole handshake must finish within Config.HandshakeTimeout (10 s).
// Before tune-ok, frames up to the server's frame-max are accepted (the spec
// only requires 4096; more is allowed and helps large token passwords).
//
// Once open, connection.update-secret (a client refreshing an expiring
// token) is answered with update-secret-ok and logged at INFO, as RabbitMQ
// 3.10 to 4.x answer it with their internal user database: the new secret
// is neither checked nor kept, and nothing is re-checked, because the
// user's permissions already apply to open connections and deleting the
// user closes them with 320 (handleUpdateSecret in auth.go). A credential
// that expires (Config.Login set LoginAttempt.Expires: an OAuth 2 token)
// is the exception: the connection is closed with 403 "credential
// expired" at that time, and update-secret's new secret is checked with
// Config.UpdateSecret, which moves the expiry or refuses it with 530
// (expiry.go). Before connection.open-ok it is 503 like any method out of
// sequence. The
// broker's Go-API Channel has no connection to refresh and so no such
// method; Broker.Dial connections are served here like TCP ones.
//
// # Heartbeats
//
// With a negotiated interval, the connection is ticked every half interval
// by the process's one heartbeat schedule (heartbeat.go: a heap of
// connections under one timer, which runs the ticks of all connections due
// within 50 ms of each other on one wake-up; no timer per connection): when
// nothing but heartbeats was written since the last tick a heartbeat frame
// goes out (an idle client hears from us every half interval, leaving slack
// for timer jitter) and the writer's spare buffer is given back, and when
// no frame arrived for two intervals the stream is closed. Over TCP the
// tick writes the heartbeat itself, in the writer's turn, with a send that
// does not wait (transport.TryWriter), so an idle connection's heartbeat
// wakes none of its goroutines; a socket without room leaves the frame to
// a writer goroutine.
//
// # Flow control
//
// Config.Alarms is the broker's alarm state (memory, disk). While an alarm
// is on, the reader that reads a basic.publish method frame, or a content
// header or body frame (RabbitMQ 4.x's reader blocks after those too),
// holds it, sends connection.blocked with RabbitMQ's reason when the client
// announced the connection.blocked capability, pauses the heartbeat monitor
// and reads nothing more until every alarm cleared; then it sends
// connection.unblocked and handles the frame it held. Connections that only
// consume are never held, so consumers keep draining. A direct connection's
// publish waits the same way (WaitUnblocked, honouring its context). The
// check costs one atomic load per frame while no alarm is on, and a held
// reader still wakes for Shutdown and the close handshake.
//
// A held reader also watches its TCP socket (bare or under TLS) without
// reading it (transport.HangupWatcher, Linux): a peer that closed (FIN) or reset its
// end has its socket closed and its connection released at once, so
// publishers that gave up do not keep their connections and descriptors
// for the alarm's duration; the frames they sent behind the held one are
// dropped with them, unconfirmed. RabbitMQ 4.x notices such a peer only
// when a heartbeat it sends fails. Two cases still wait: a peer whose FIN
// sits behind data the full socket buffers cannot take (the kernel sends
// it only once the data drains; a reset is seen at once), and streams that
// are not TCP sockets (Broker.Dial's pipes, other systems).
//
// # Draining
//
// Config.Drain, once started (the broker's Shutdown), refuses every publish
// with connection.close 320 CONNECTION_FORCED, stops new deliveries (a
// consumer's HasRoom says no; basic.get answers get-empty) and lets acks,
// nacks and rejects through; Conn.Outstanding counts what a connection
// still has to settle (drain.go).
//
// # Events
//
// Config.Events (an internal/events Hub; nil reports nothing) hears
// ConnectionCreated once a connection is open (open-ok sent; a direct
// connection at NewDirect), ConnectionClosed once a connection that was
// open has ended and released everything, with the first connection.close
// either side sent (else the error that ended the stream),
// ConsumerCreated after consume-ok, ConsumerDeleted on basic.cancel, the
// channel's close and the server's cancel (queue deleted), and
// MessageReturned with each basic.return (events.go). Each call site costs
// one atomic load while nobody subscribed to its kind.
//
// # Memory the connections hold
//
// The memory alarm compares the message bytes the queues hold in memory
// with the watermark, plus Alarms.Buffered: the bytes connections hold
// before any queue has them. Those are:
//
//   - Bodies still arriving. A content header reserves nothing for its
//     announced body-size, which is only a claim: its properties wait in a
//     per-channel scratch (kept between messages up to 4 KiB) and the body
//     gets an allocation, shared with the properties, at its first body
//     frame. The allocation grows with what arrived, doubling, but never
//     past twice that nor past the announced size, so a body in one frame
//     is sized exactly at once, a long body is copied a bounded number of
//     times, and a header announcing 128 MiB that sends 64 KB costs about
//     128 KB. A content counts while it waits for more frames; one whose
//     body completes in the frame at hand is routed at once and never
//     touches the shared counter.
//   - The publishes of an uncommitted transaction, until tx.commit hands
//     them to the queues, or tx.rollback, the channel's close or the
//     connection's end drops them. There is no size limit of a
//     transaction's own, as in RabbitMQ 4.x (whose uncommitted publishes
//     are channel memory under its watermark): a transaction that fills
//     memory raises the alarm and its publisher is held at its next
//     publish; it may then wait until it hangs up, when the bytes are
//     released.
//   - Direct reply-to replies in a requester's outbox, until they are
//     written to its socket (or dropped with the connection): no queue
//     holds them. A requester's outbox takes a reply only while it holds
//     less than its bound (512 KiB), so a requester that does not
//     read loses replies rather than growing it.
//
// Every path that ends a content or a transaction (completion, commit,
// rollback, a channel's close, the server closing a channel, the
// connection's end) gives back what it counted; the session fuzzer checks
// that nothing stays counted once a connection ended.
//
// # Errors
//
// Handlers return *amqp.Error. On channel 0, during the handshake, and for
// every hard reply code the connection is closed: connection.close with
// code, text and the offending class/method ids; from then on only
// connection.close (answered with close-ok) and connection.close-ok are
// looked at, and the stream closes on close-ok or after Config.CloseTimeout.
// Soft codes close the channel: channel.close, then everything on the
// channel is discarded until channel.close-ok (a crossing channel.close gets
// its close-ok). Codes, following the spec's definitions:
//
//   - 501 FRAME_ERROR: malformed frames (bad end octet, size above
//     frame-max, unknown type, a heartbeat on a channel other than 0 or with
//     a payload), a content body frame larger than what its header left
//     (RabbitMQ's assembler), a body-size above 512 MiB (RabbitMQ's hard
//     limit; the configurable 406 limit belongs to the publish path).
//   - 502 SYNTAX_ERROR: arguments or properties that do not decode; a
//     malformed PLAIN/AMQPLAIN response.
//   - 503 COMMAND_INVALID: unknown class/method ids; connection methods out
//     of sequence or on a channel other than 0; methods only the server
//     sends (RabbitMQ answers 504 for some of these; the spec's code is used).
//   - 504 CHANNEL_ERROR: any frame on a channel that is not open other than
//     channel.open, a second channel.open, a non-connection method on
//     channel 0.
//   - 505 UNEXPECTED_FRAME: content frames out of order (a body without a
//     header, a header without a content method, a method or header while a
//     body is expected, a header for another class), a content frame on
//     channel 0, any frame on a channel before connection.open-ok.
//   - 530 NOT_ALLOWED: tune-ok outside the limits, unknown vhost, a channel
//     number above the negotiated channel-max (RabbitMQ's code for reaching
//     channel_max).
//   - 540 NOT_IMPLEMENTED: basic.publish with
//     immediate=true, basic.recover with requeue=false, basic.qos with a
//     prefetch-size, and channel.flow active=false (RabbitMQ refuses all of
//     these the same way), and on a Config without VHost (connection-only
//     mode, used by this package's tests) every method of the exchange,
//     queue, basic, tx and confirm classes.
//
// # The broker classes
//
// With a vhost (Config.VHost), channels implement the exchange and queue
// classes (topology.go, over internal/vhost), the basic class (basic.go:
// consume, get, ack/nack/reject, recover, qos, deliveries), publish,
// publisher confirms and transactions (publish.go). Queue actors deliver
// from their own goroutines through consumer.Deliver, under the channel's
// delivery lock, which numbers deliveries so tags go out in order; replies
// and confirms pass a gate lock so a channel's close is always its last
// frame. No lock is held while waiting on a queue actor. Confirms are
// answered in publish order, consecutive acks coalesced into one basic.ack
// with multiple=true. A nack means the message was not stored: when a store
// cannot tell (queue.ErrOutcomeUnknown), the confirm is withheld and the
// connection closed with 541 INTERNAL_ERROR.
//
// Streams (stream.go; docs/streams.md): basic.consume on a stream needs a
// per-consumer prefetch (406 otherwise) and manual acks (540), refuses a
// channel-wide prefetch (540), and passes its x-stream-* arguments to the
// queue (queue.ParseStreamConsume); basic.get and queue.purge on a stream
// are 540, in RabbitMQ 4.x's words. Offset tracking needs a consumer tag
// of the client's own. Settles go to the queue as for any queue; the
// queue treats them as credit.
//
// # Direct reply-to
//
// replyto.go implements RabbitMQ's amq.rabbitmq.reply-to (texts and
// codes of RabbitMQ 3.13/4.x rabbit_channel). basic.consume on it registers
// the channel's one reply consumer with the vhost under a generated name
// (amq.rabbitmq.reply-to.<22 random characters>); it needs no read
// permission, as in RabbitMQ. A consume in ack mode is 406 "reply consumer
// cannot acknowledge", a second one 406 "reply consumer already set", a
// consumer tag in use 530 "attempt to reuse consumer tag". A publish whose
// reply_to is amq.rabbitmq.reply-to has it rewritten to that name, or is
// 406 "fast reply consumer does not exist" on a channel without one. A
// publish to the default exchange with a generated name as routing key is
// handed straight to the requester's channel (a basic.deliver with its next
// delivery tag, nothing to ack), also inside a transaction, and dropped if
// the requester's outbox is full. A name whose consumer was cancelled or
// whose channel closed is unroutable: a mandatory reply comes back 312
// NO_ROUTE. Under the 4.2 and 4.3 profiles (Config.Profile) such a reply
// counts as routed and nothing is returned, as RabbitMQ 4.2 does (it does
// not check the requester at routing time). Before 4.2 RabbitMQ returned
// every mandatory reply, delivered or not; Warren's 3.13 to 4.1 profiles
// return exactly the undeliverable ones.
//
// In a cluster the names carry the member that generated them
// (amq.rabbitmq.reply-to.<raft id>.<token>), and a reply to another
// member's name goes to that member (vhost.ForwardReply): only a mandatory
// one whose return depends on it (the profiles before 4.2) waits for the
// owner's answer, at most the cluster's ReplyTimeout, and is returned when
// none came; the rest are confirmed at once, as RabbitMQ 3.13 confirms a
// reply once it is routed. queue.declare of another member's name asks that
// member.
//
// # Version profiles
//
// Config.Profile (internal/compat) selects the answers that differ by
// RabbitMQ series: the smallest frame-max tune-ok may choose (4096; 8192
// from 4.1; frames before tune-ok may still be as large as the server's
// frame-max, more than any RabbitMQ reads), basic.qos global=true
// (per consumer from 4.3), direct reply-to with mandatory (above), and
// the permission a passive queue.declare or exchange.declare needs (none
// up to 4.2.5; configure in 4.2.6 and 4.3.0; configure, write or read
// from 4.2.7 and 4.3.1; the default exchange is refused first). The
// consumer arguments a queue's type refuses are the vhost's
// (CheckConsumeArgs: x-consumer-timeout from 4.3). In
// every series a consume from a quorum queue on a channel with a global
// prefetch limit is 540 NOT_IMPLEMENTED "... does not support global qos".
// queue.declare of amq.rabbitmq.reply-to, or of a live generated name, passive
// or not, answers declare-ok with 0 messages and 1 consumer; of a dead one,
// 404. Replies are per vhost and per node: in a cluster, a reply published
// on another node than the requester's does not reach it.
//
// # Direct connections
//
// NewDirect builds a Conn with no stream, already open on its vhost: Handle
// feeds it method structs (the path a decoded frame takes), and replies go
// to a Sink as method structs instead of frames. The root package's direct
// Channel is built on it, so the wire and the Go API share every rule.
//
// # Logging
//
// INFO is kept for what an operator acts on: a network connection's open
// and close. A channel closed by an error (channel.close with its reply
// code) is WARN. A direct connection's open and close are DEBUG: they are
// the Go API's channels and the management API's get and publish.
package session
