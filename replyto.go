package broker

import "github.com/warrenmq/broker/internal/peer"

// Direct reply-to across brokers: package cluster attaches a
// peer.Forwarder (internal/peer) to Options, whose names carry this
// broker's tag; New attaches replyReceiver to it, the broker's own
// requesters, and Close detaches it.

func init() {
	peer.Attach = func(opts any, p peer.Peers) { opts.(*Options).peers = p }
}

// replyReceiver is the peer.Receiver New attaches: the broker's own
// requesters.
type replyReceiver struct{ b *Broker }

// replyTag is the tag of this broker's reply names, "" without a
// forwarder.
func (b *Broker) replyTag() string {
	if b.opts.peers.Replies == nil {
		return ""
	}
	return b.opts.peers.Replies.ReplyTag()
}

// validReplyTag reports whether tag fits in a reply name, where a dot ends
// it.
func validReplyTag(tag string) bool {
	if tag == "" || len(tag) > 32 {
		return false
	}
	for _, c := range []byte(tag) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// DeliverReply implements peer.Receiver.
func (r replyReceiver) DeliverReply(vhost, name string, props, body []byte) bool {
	vh, ok := r.b.lookupVHost(vhost)
	if !ok {
		return false
	}
	requester, ok := vh.ReplyReceiver(name)
	return ok && requester.DeliverReply(name, props, body)
}

// ReplyExists implements peer.Receiver.
func (r replyReceiver) ReplyExists(vhost, name string) bool {
	vh, ok := r.b.lookupVHost(vhost)
	if !ok {
		return false
	}
	_, ok = vh.ReplyReceiver(name)
	return ok
}
