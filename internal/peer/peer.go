package peer

// Forwarder carries direct reply-to replies between brokers that
// serve the same clients, such as the members of a cluster (package
// cluster provides one). Each broker names the requesters it holds
// amq.rabbitmq.reply-to.<tag>.<token>, with its own ReplyTag, so a broker
// that receives a reply to another's name knows where to send it; the
// receiving broker's forwarder hands it to the Receiver broker.New attached.
//
// ForwardReply and ReplyExists are called on the publishing connection's
// goroutine: they must return at once, or, where they wait for an answer,
// within a short bound.
type Forwarder interface {
	// ReplyTag is this broker's tag in the names it generates: 1 to 32
	// letters, digits, '-' or '_', different for every broker that
	// forwards to this one.
	ReplyTag() string
	// ForwardReply hands the reply published to name, in vhost, to the
	// broker tagged tag. Without wait it returns at once, whether the
	// reply was queued for that broker (false for an unknown tag or a
	// full queue). With wait (a mandatory reply, whose return depends on
	// it) it returns whether that broker's requester took the reply,
	// false when the broker did not answer in time. props are the raw
	// basic properties; the forwarder copies what it keeps.
	ForwardReply(vhost, tag, name string, props, body []byte, wait bool) bool
	// ReplyExists asks the broker tagged tag whether a requester still
	// consumes under name (queue.declare of a reply name), with the same
	// bound.
	ReplyExists(vhost, tag, name string) bool
	// Attach is called by broker.New, before the broker serves anyone, with the
	// broker's receiving end, to which the forwarder hands what other
	// brokers send this one; and by Close with nil, before the broker
	// stops. It must not block.
	Attach(Receiver)
}

// Receiver is a broker's receiving end of its Forwarder.
type Receiver interface {
	// DeliverReply hands a reply forwarded by another broker to the
	// requester consuming under name in vhost, as a publish to name on
	// this broker would, and reports whether the requester took it: false
	// when it is gone. A requester whose connection has no room for it
	// drops it and still counts as having taken it, as for a local reply.
	// It does not block. The requester's connection may keep props and
	// body: the caller must not reuse them.
	DeliverReply(vhost, name string, props, body []byte) bool
	// ReplyExists reports whether a requester consumes under the direct
	// reply-to name in vhost on this broker.
	ReplyExists(vhost, name string) bool
}

// Peers is what a broker is told of the brokers it shares its stores
// with. Its zero value is a broker on its own.
type Peers struct {
	// Alive reports, in shared mode, whether the broker named node
	// (another one sharing the stores) is alive. The unacked scanner
	// returns a peer's deliveries to their queues once Alive says it is
	// dead; nil never says so, and leaves them to their owner. It is
	// called from the scanner's goroutine and must not block for long.
	Alive func(node string) bool
	// Replies carries direct reply-to replies to brokers that serve the
	// same clients, so a reply published on this broker reaches a
	// requester on another one. nil keeps every reply on this broker.
	Replies Forwarder
	// QueueReplicas grows and shrinks the quorum queues' replicas for the
	// management API; nil (no queue groups) answers its routes as a node
	// with no other members.
	QueueReplicas QueueReplicas
}

// Attach gives the broker.Options at opts (a *broker.Options) the peers
// p, for the broker.New that follows. Package broker sets it when it
// loads; package cluster (and the tests of shared mode) call it.
var Attach func(opts any, p Peers)
