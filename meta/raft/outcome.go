package raft

import (
	"context"
	"errors"

	"github.com/warrenmq/broker/storage"
)

// outcomeUnknown marks an error after which a write may or may not be
// applied, so that callers that must not guess (a publisher confirm) can
// tell it from a write that certainly failed: it matches both the cause
// and storage.ErrOutcomeUnknown, and reads as the cause.
type outcomeUnknown struct{ err error }

func (e outcomeUnknown) Error() string   { return e.err.Error() }
func (e outcomeUnknown) Unwrap() []error { return []error{e.err, storage.ErrOutcomeUnknown} }

// markOutcome wraps err, returned by submit, in outcomeUnknown when the
// command may have been proposed: the leader changed or the state was
// replaced while it waited, a forwarded proposal was lost or not applied in
// time (ErrProposalLost), or the context ended or the node stopped while it
// was in flight. A proposal raft refused (ErrProposalDropped) or this node
// could not forward (ErrNotProposed) was never appended and stays a plain
// error, so its publisher hears a nack. ctxErr is ctx.Err() before the call: a
// context already done makes submit return before proposing anything.
func markOutcome(err, ctxErr error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLeaderChanged), errors.Is(err, ErrStateReplaced), errors.Is(err, ErrStopped),
		errors.Is(err, ErrProposalLost):
		return outcomeUnknown{err}
	case ctxErr == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return outcomeUnknown{err}
	}
	return err
}
