package queue

import "sync"

// stateToken is the ownership of a queue's state.
//
// Everything in Queue below "Owned by the state's holder" (the cursor,
// the cache, the returned set, the deliveries out, the consumers, the
// gathered publishes and acks, the features' bookkeeping, the claimer's
// own fields) has one owner at a time: whoever holds the queue's
// stateToken. There are three holders, one after the other, never two at
// once:
//
//   - Start holds it while it recovers the queue, and gives it to the
//     actor by giving it up before the actor starts.
//   - The actor goroutine takes it for each step (a mailbox drain, a
//     commit's outcome, a retry) and gives it up when the step is done
//     and it goes back to sleep in its select, or exits for want of work
//     (park, actor.go). When it stops it takes it for good.
//   - A Get or AckGot caller may take it while the actor sleeps
//     (tryAcquire): if the mailbox and the inbox are empty and no commit
//     is in flight, every op sent before the caller's has been handled,
//     so the caller runs its op and what follows every step (afterOps)
//     on its own goroutine, exactly as the actor would have, and gives
//     the token back. A basic.get round trip then wakes no thread for the
//     queue, which cut its broker CPU by a third on a 2-core machine
//     (docs/performance.md). If the token is taken or anything is
//     queued, the caller sends its op to the mailbox like any other.
//
// The token is a mutex, so each hand-off is a happens-before edge the race
// detector sees: TestOwnershipHandOff drives the hand-off from many
// goroutines under -race. mustHold, at the entry of every step, panics
// when the state is about to be worked on with nobody holding the token.
// The token's own fields are plain, written by the holder only: a
// goroutine that reads them without holding the token is itself the bug,
// and -race reports it (atomics would hide it, and cost a locked
// instruction per hand-off on the basic.get path).
// The actor never blocks on anything a holder waits for while holding
// it (a caller never waits on the actor with the token, and a commit in
// flight keeps callers out), so the hand-off cannot deadlock.
type stateToken struct {
	mu sync.Mutex
	// holder is who holds the token (holderNone when nobody does): for
	// mustHold and the tests, never to decide who may go on (mu does).
	holder int32
	// inPlace counts the ops callers ran in place (tests check that the
	// hand-off happened).
	inPlace uint64
	// steps counts the actor's steps: with inPlace, the actor's idle
	// timer sees whether anything happened since it last looked.
	steps uint64
}

const (
	holderNone int32 = iota
	holderActor
	holderCaller
)

// acquire takes the token for the actor (or Start), waiting for a caller
// that holds it to finish.
func (t *stateToken) acquire() {
	t.mu.Lock()
	t.enter(holderActor)
}

// tryAcquire takes the token for a caller unless somebody holds it.
func (t *stateToken) tryAcquire() bool {
	if !t.mu.TryLock() {
		return false
	}
	t.enter(holderCaller)
	return true
}

func (t *stateToken) enter(h int32) {
	if t.holder != holderNone {
		panic("queue: state token taken while held")
	}
	t.holder = h
}

// release gives the token up.
func (t *stateToken) release() {
	t.holder = holderNone
	t.mu.Unlock()
}

// mustHold panics unless somebody holds the token: the state is about to
// be worked on.
func (t *stateToken) mustHold() {
	if t.holder == holderNone {
		panic("queue: state worked on without its token")
	}
}
