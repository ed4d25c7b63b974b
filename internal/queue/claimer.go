package queue

import (
	"context"
	"errors"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// claimer is how the actor takes messages from the stores and keeps its
// count of the ready ones: the one place where a single-node queue and a
// shared (cluster) queue differ (doc.go, "Claiming"). Start picks one for
// good: localClaimer, whose cursor and returned set nobody else touches,
// or, with Config.Shared, sharedClaimer, whose every claim is one atomic
// unacked.Claimer claim against other brokers working on the same stores.
// Everything else (dispatch, get, settling, the features) is written once
// against this interface. Its methods run on the state's owner only
// (actor.go, "Ownership").
type claimer interface {
	// recover rebuilds the actor's view of the stores at Start.
	recover(ctx context.Context) error
	// catchUp applies what other brokers did since the last call. It
	// runs before the actor dispatches and before it answers a call.
	catchUp(ctx context.Context)
	// commit writes one claim in the design's order: index entries,
	// then the cursor move, the returned messages named by w.taken taken
	// with it. errLostClaim means another broker won and nothing was
	// written: the caller gives the batch back and calls lost.
	commit(ctx context.Context, w claimWrite) error
	// lost catches up with the stores after errLostClaim; with pool the
	// returned set is rebuilt too.
	lost(ctx context.Context, pool bool)
	// appended makes a batch this actor stored ready.
	appended(recs []storage.Record)
	// counted sets the count of live records at and beyond the cursor
	// after the shard was read again.
	counted(n uint64)
	// hold claims returned messages (with their delivery counts) the
	// actor is about to dead-letter, so nobody else serves them
	// meanwhile; false puts them back (ready again) and leaves the
	// dead-lettering for later.
	hold(ctx context.Context, recs []storage.Record, counts []uint32) bool
	// heldState is the state of the index entry of a message taken from
	// the cursor to be dead-lettered.
	heldState() unacked.State
	// unhold makes a held message ready again: a dead-letter target
	// failed to store its copy.
	unhold(ctx context.Context, r storage.Record)
	// requeueForeign returns deliveries the actor does not hold (a dead
	// broker's, handed over by the scanner).
	requeueForeign(ctx context.Context, es []unacked.Entry)
	// purge deletes the ready messages and reports how many.
	purge(ctx context.Context) (uint64, error)
}

// claimWrite is what one claim writes.
type claimWrite struct {
	// entries are the claimed messages' index entries, written first.
	entries []unacked.Entry
	// taken are the returned messages the claim serves. Only a shared
	// queue's returned set is anybody else's, so only sharedClaimer
	// writes them (unacked.Claim.Taken), and with them takenNoAck: the
	// entries of those served to no-ack consumers, which the claim
	// deletes right after, so that their entries never read Returned,
	// free for another broker, in between.
	taken      []unacked.Key
	takenNoAck []unacked.Entry
	// move moves the cursor to to, past n live records.
	move bool
	to   uint64
	n    int
}

var (
	_ claimer = (*localClaimer)(nil)
	_ claimer = (*sharedClaimer)(nil)
)

// localClaimer is the single-node claimer: the cursor is this actor's
// alone, so a claim is an index write then a cursor CAS that cannot
// lose, and the ready count from the cursor is kept as a counter
// (fromCursor) rather than taken from offsets: DropTransient and purges
// leave gaps at and beyond the cursor.
type localClaimer struct{ q *Queue }

func (l *localClaimer) catchUp(context.Context)    {}
func (l *localClaimer) lost(context.Context, bool) {}
func (l *localClaimer) heldState() unacked.State   { return unacked.Returned }
func (l *localClaimer) counted(n uint64)           { l.q.fromCursor = n }
func (l *localClaimer) requeueForeign(context.Context, []unacked.Entry) {
	// Nobody else delivers this queue's messages: an entry it does not
	// hold was settled or requeued meanwhile.
}

// hold has nothing to write: the returned messages' Returned entries are
// this actor's already, and recovery returns them after a crash.
func (l *localClaimer) hold(context.Context, []storage.Record, []uint32) bool { return true }

// unhold puts the message back in the returned set, in memory: its entry
// is still Returned.
func (l *localClaimer) unhold(_ context.Context, r storage.Record) {
	q := l.q
	q.setWaiting(r.Offset, waiting{rec: r})
	q.insertReturned(r.Offset)
	q.becameReady(&r)
	q.feat.ttl = true
}

// appended counts the records and keeps them in memory when everything
// before them is.
func (l *localClaimer) appended(recs []storage.Record) {
	q := l.q
	q.fromCursor += uint64(len(recs))
	if uint64(len(q.pending)) == q.fromCursor-uint64(len(recs)) &&
		q.pendingFits(recs) {
		q.appendPending(recs)
	}
}

// commit writes index entries, then moves the cursor. If the CAS fails
// (the cursor moved under the actor, which only a broken store does) the
// entries are taken back and the cached records dropped, so the next
// claim reads again.
func (l *localClaimer) commit(ctx context.Context, w claimWrite) error {
	q := l.q
	s := q.cfg.Stores
	if len(w.entries) > 0 {
		if err := s.Index.Put(ctx, w.entries); err != nil {
			return err
		}
	}
	if !w.move {
		return nil
	}
	swapped, err := s.Cursors.CompareAndSwapOffset(ctx, q.key, q.cursor, w.to)
	if err == nil && !swapped {
		err = errors.New("queue: cursor moved by someone else")
		if cur, rerr := s.Cursors.Offset(ctx, q.key); rerr == nil {
			q.cursor = cur
			q.emptyPending()
		}
	}
	if err != nil {
		var keys []unacked.Key
		for _, e := range w.entries {
			if e.Offset >= q.cursor {
				keys = append(keys, e.Key)
			}
		}
		if len(keys) > 0 {
			_ = s.Index.Delete(ctx, keys) // best effort: recovery drops them too
		}
		return err
	}
	q.cursor = w.to
	q.fromCursor -= uint64(w.n)
	return nil
}
