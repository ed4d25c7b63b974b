package vhost

import "strings"

// ReplyQueue is the pseudo-queue of direct reply-to: a requester consumes
// from it in no-ack mode and names it as a request's reply_to, and the
// channel rewrites that to a name of its own (ReplyPrefix + token).
const ReplyQueue = "amq.rabbitmq.reply-to"

// ReplyPrefix starts every generated direct reply-to name.
const ReplyPrefix = ReplyQueue + "."

// ReplyReceiver is the requester's side of direct reply-to: the channel
// that consumes from ReplyQueue. DeliverReply hands it one reply published
// to its name and reports whether it took it (false once it is closing).
// It runs on the publisher's goroutine and must not block.
type ReplyReceiver interface {
	DeliverReply(routingKey string, props, body []byte) bool
}

// AddReplyReceiver registers r under a fresh name of the shape
// amq.rabbitmq.reply-to.<token> and returns the name. The token is 128
// random bits, so nobody can guess another requester's name: it plays the
// part of RabbitMQ's encoded channel pid and key (4.x), which also only the
// requester's own publishes reveal.
func (v *VHost) AddReplyReceiver(r ReplyReceiver) string {
	for {
		name := GenerateName(ReplyPrefix)
		if _, dup := v.replies.LoadOrStore(name, r); !dup {
			return name
		}
	}
}

// RemoveReplyReceiver forgets a name AddReplyReceiver returned: replies to
// it are unroutable from now on.
func (v *VHost) RemoveReplyReceiver(name string) {
	v.replies.Delete(name)
}

// ReplyReceiver returns the receiver of a direct reply-to name, if it is a
// generated name whose requester still consumes.
func (v *VHost) ReplyReceiver(name string) (ReplyReceiver, bool) {
	if !IsReplyName(name) {
		return nil, false
	}
	r, ok := v.replies.Load(name)
	if !ok {
		return nil, false
	}
	return r.(ReplyReceiver), true
}

// IsReplyName reports whether name is a generated direct reply-to name
// (ReplyPrefix and something after it), which no queue can have: queue
// names starting with amq. are reserved.
func IsReplyName(name string) bool {
	return len(name) > len(ReplyPrefix) && strings.HasPrefix(name, ReplyPrefix)
}
