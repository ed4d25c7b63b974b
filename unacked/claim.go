package unacked

import "context"

// Claim is one atomic claim of messages by a broker that shares its stores
// with others (see Claimer).
type Claim struct {
	VHost string
	Queue string
	// Move asks to move the queue's cursor (meta.Cursors) from From to To;
	// the claim fails unless the cursor is at From.
	Move     bool
	From, To uint64
	// Taken are requeued messages the claim takes: each must be an entry in
	// state Returned, else the claim fails.
	Taken []Key
	// Entries are written when the claim succeeds (the claimed messages'
	// entries in state Delivered, Taken's among them).
	Entries []Entry
}

// Claimer is implemented by an Index that shares one atomic store with the
// queue cursors (a cluster's replicated store): the index write and the
// cursor move of a claim happen together or not at all, so brokers racing
// for the same messages never overwrite each other's entries.
type Claimer interface {
	// Claim applies c when its conditions hold and reports whether it did;
	// ok false (with a nil error) means another broker got there first and
	// nothing was written.
	Claim(ctx context.Context, c Claim) (ok bool, err error)
}
