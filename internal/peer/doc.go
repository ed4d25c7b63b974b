// Package peer is the one hook through which package cluster tells a
// broker about the other brokers that share its stores: whether one is
// alive (the unacked scanner returns a dead one's deliveries) and how a
// direct reply-to reply reaches a requester on one (Forwarder and
// Receiver). It keeps this plumbing off broker.Options and broker.Broker,
// which an embedder reads: only this module's packages can call Attach.
//
// It promises nothing beyond the contracts of its interfaces; it imports
// nothing, so package cluster and the root can both depend on it.
package peer
