package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// Shared mode (doc.go, "# Shared mode"): several brokers' actors serve one
// queue from one replicated set of stores. This file holds sharedClaimer,
// the claimer for that mode, and Observe, its feed of other brokers'
// changes; the single-node queue (localClaimer) calls none of it. The
// lazy records of the returned set (load, loadHead, loadWaiting) are only
// ever made here, and are no-ops for a queue that never has any.

// errLostClaim reports a Claim that found the store other than the actor
// saw it: another broker moved the cursor or took a returned message
// first. It is not a store error: the caller catches up (resync) and
// tries again.
var errLostClaim = errors.New("queue: claim lost to another broker")

// maxLostClaims bounds the claims one dispatch or get may lose in a row
// before it leaves the rest to the retry timer, so a storm of contention
// cannot keep the actor from its mailbox.
const maxLostClaims = 64

// sharedClaimer is the claimer of a shared queue: every claim is one
// unacked.Claimer claim that other brokers' claims may beat. store and
// tail belong to the state's owner; the rest is written by Observe on the
// store's apply goroutine and taken by the owner (catchUp).
type sharedClaimer struct {
	q     *Queue
	store unacked.Claimer
	// tail is the shard's next offset as far as this actor knows (its own
	// appends and ChangeAppended); it only grows. Records in [cursor,
	// tail) are dense, so fromCursor is tail - cursor.
	tail uint64

	// Written by Observe. Appends and cursor moves coalesce to the
	// highest offset seen; requeues and takes to the latest change per
	// offset (changes arrive in apply order, so the latest is the truth).
	maxTail   atomic.Uint64
	maxCursor atomic.Uint64
	pending   atomic.Bool // something above changed since catchUp
	mu        sync.Mutex
	pool      map[uint64]meta.Change // ChangeReturned or ChangeTaken by offset
	reset     bool                   // ChangeReset: reload everything
}

// Observe hands the queue one change applied to the shared store (the
// broker wires meta.ChangeFeed.Watch to it). It is safe from any
// goroutine and never blocks: the change is recorded (appends and cursor
// moves as atomic maxima, requeues and takes in a small map) and the actor
// is kicked. Changes for other queues and kinds that do not concern a
// queue are ignored, and so is everything when the queue is not Shared
// or has stopped.
func (q *Queue) Observe(c meta.Change) {
	if q.closing.Load() {
		return
	}
	q.kind.observe(c)
}

// observeShared is Observe for a classic or quorum queue (messages).
func (q *Queue) observeShared(c meta.Change) {
	sh, shared := q.claimer.(*sharedClaimer)
	if !shared {
		return
	}
	switch c.Kind {
	case meta.ChangeAppended:
		if c.Shard != q.cfg.Shard {
			return
		}
		storeMax(&sh.maxTail, c.Offset)
	case meta.ChangeCursor:
		if c.VHost != q.cfg.VHost || c.Queue != q.cfg.Name {
			return
		}
		storeMax(&sh.maxCursor, c.Offset)
	case meta.ChangeReturned, meta.ChangeTaken:
		if c.VHost != q.cfg.VHost || c.Queue != q.cfg.Name {
			return
		}
		sh.mu.Lock()
		if sh.pool == nil {
			sh.pool = make(map[uint64]meta.Change)
		}
		sh.pool[c.Offset] = c
		sh.mu.Unlock()
	case meta.ChangeReset:
		sh.mu.Lock()
		sh.reset = true
		sh.mu.Unlock()
	default:
		return
	}
	sh.pending.Store(true)
	q.Kick()
}

// storeMax raises v to x unless it is already higher.
func storeMax(v *atomic.Uint64, x uint64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}

// syncReady sets the ready-from-cursor count from tail and cursor.
func (sh *sharedClaimer) syncReady() {
	q := sh.q
	if sh.tail < q.cursor {
		sh.tail = q.cursor
	}
	q.fromCursor = sh.tail - q.cursor
}

// catchUp brings the actor up to date with the changes Observe
// recorded. It runs on the actor, before dispatch and before every answer.
func (sh *sharedClaimer) catchUp(ctx context.Context) {
	q := sh.q
	if !sh.pending.Load() {
		return
	}
	sh.pending.Store(false) // before reading: a later change sets it again
	sh.mu.Lock()
	pool, reset := sh.pool, sh.reset
	sh.pool, sh.reset = nil, false
	sh.mu.Unlock()
	if reset {
		if err := sh.reload(ctx); err != nil {
			q.cfg.Logger.Error("shared reload failed", "queue", q.cfg.Name, "err", err)
			sh.mu.Lock()
			sh.reset = true // try again at the next change or retry
			sh.mu.Unlock()
			sh.pending.Store(true)
			q.scheduleRetry()
		}
	}
	if t := sh.maxTail.Load(); t > sh.tail {
		sh.tail = t
	}
	if c := sh.maxCursor.Load(); c > q.cursor {
		// Another broker claimed records this actor may have cached:
		// drop the cache, the next take reads from the new cursor.
		q.cursor = c
		q.emptyPending()
	}
	for _, c := range pool {
		q.applyPoolChange(ctx, c)
	}
	sh.syncReady()
	if q.feat.bytes {
		q.countReadyBytes(ctx)
	}
}

// applyPoolChange applies one ChangeReturned or ChangeTaken to the
// returned set. Messages this actor holds (out, or leaving while it
// dead-letters them) are its own business: changes its own writes made
// come back here too.
func (q *Queue) applyPoolChange(ctx context.Context, c meta.Change) {
	off := c.Offset
	if _, held := q.out[off]; held {
		return
	}
	if _, held := q.feat.leaving[off]; held {
		return
	}
	w, known := q.waiting[off]
	switch c.Kind {
	case meta.ChangeReturned:
		if known {
			if c.DeliveryCount > w.count {
				w.count = c.DeliveryCount
				q.setWaiting(off, w)
			}
			return
		}
		q.joinPool(ctx, off, c.DeliveryCount)
	case meta.ChangeTaken:
		if known {
			delete(q.waiting, off)
			q.removeReturned(off)
		}
	}
}

// joinPool adds a message another broker (or the scanner) requeued to the
// returned set. Its record is read when it is taken, except in a priority
// queue, which needs its priority to place it.
func (q *Queue) joinPool(ctx context.Context, off uint64, count uint32) {
	q.setWaiting(off, waiting{count: count, lazy: true})
	if q.prioritized() {
		ok, err := q.load(ctx, off)
		if err != nil || !ok {
			delete(q.waiting, off) // gone, or a read error: a resync brings it back
			return
		}
	}
	q.insertReturned(off)
	q.feat.ttl = true // it may carry an expiry: expireHead looks
}

// removeReturned removes off from the returned set.
func (q *Queue) removeReturned(off uint64) {
	i := -1
	if q.prioritized() {
		i = slices.Index(q.returned, off)
	} else if j, found := slices.BinarySearch(q.returned, off); found {
		i = j
	}
	if i >= 0 {
		q.returned = slices.Delete(q.returned, i, i+1)
	}
}

// load reads the record of a lazy waiting message. ok is false when the
// record is gone (whoever took the message settled it): the message is
// then forgotten.
func (q *Queue) load(ctx context.Context, off uint64) (ok bool, err error) {
	w, known := q.waiting[off]
	if !known {
		return false, nil
	}
	if !w.lazy {
		return true, nil
	}
	recs, err := q.cfg.Stores.Shards.Read(ctx, q.cfg.Shard, off, 1)
	if err != nil {
		return false, err
	}
	if len(recs) == 0 || recs[0].Offset != off {
		delete(q.waiting, off)
		return false, nil
	}
	w.rec, w.lazy = recs[0], false
	q.setWaiting(off, w)
	return true, nil
}

// loadHead makes sure the head of the returned set has its record,
// forgetting heads whose record is gone.
func (q *Queue) loadHead(ctx context.Context) error {
	for len(q.returned) > 0 {
		ok, err := q.load(ctx, q.returned[0])
		if err != nil || ok {
			return err
		}
		q.returned = q.returned[1:]
	}
	return nil
}

// loadWaiting reads every lazy record of the returned set (a priority
// queue's ordering and the byte count need them all).
func (q *Queue) loadWaiting(ctx context.Context) {
	kept := q.returned[:0]
	for _, off := range q.returned {
		ok, err := q.load(ctx, off)
		if err != nil {
			ok = true // kept lazy; read again when taken
		}
		if ok {
			kept = append(kept, off)
		}
	}
	q.returned = kept
}

// commit is one atomic claim that moves the cursor from where this actor
// thinks it is, takes the returned messages named by w.taken and writes
// the entries (w.takenNoAck's too). A claim that finds the store
// otherwise writes nothing and yields errLostClaim.
func (sh *sharedClaimer) commit(ctx context.Context, w claimWrite) error {
	q := sh.q
	if !w.move && len(w.taken) == 0 && len(w.entries) == 0 {
		return nil
	}
	entries := w.entries
	if len(w.takenNoAck) > 0 {
		entries = append(entries[:len(entries):len(entries)], w.takenNoAck...)
	}
	ok, err := sh.store.Claim(ctx, unacked.Claim{
		VHost: q.cfg.VHost, Queue: q.cfg.Name,
		Move: w.move, From: q.cursor, To: w.to,
		Taken: w.taken, Entries: entries,
	})
	if err != nil {
		return err
	}
	if !ok {
		return errLostClaim
	}
	if w.move {
		q.cursor = w.to
		sh.syncReady()
	}
	return nil
}

// hasReturned reports whether a batch took any returned message.
func hasReturned(batch []assignment) bool {
	for i := range batch {
		if batch[i].returned {
			return true
		}
	}
	return false
}

// lost catches up with the store after a lost claim: the cursor is read
// again (and the cache dropped), and with pool the returned set is
// rebuilt from the index's Returned entries, less the deliveries this
// actor holds. A read error is logged and left to the next lost claim or
// the retry timer.
func (sh *sharedClaimer) lost(ctx context.Context, pool bool) {
	if err := sh.resync(ctx, pool); err != nil {
		sh.q.cfg.Logger.Error("shared resync failed", "queue", sh.q.cfg.Name, "err", err)
		sh.q.scheduleRetry()
	}
}

func (sh *sharedClaimer) resync(ctx context.Context, pool bool) error {
	q := sh.q
	cur, err := q.cfg.Stores.Cursors.Offset(ctx, q.key)
	if err != nil {
		return err
	}
	q.cursor = cur
	q.emptyPending()
	sh.syncReady()
	if !pool {
		return nil
	}
	kept := make(map[uint64]waiting, len(q.waiting))
	var returned []uint64
	err = q.cfg.Stores.Index.Queue(ctx, q.cfg.VHost, q.cfg.Name, func(e unacked.Entry) bool {
		if e.State != unacked.Returned {
			return true
		}
		if _, held := q.out[e.Offset]; held {
			return true
		}
		if _, held := q.feat.leaving[e.Offset]; held {
			return true
		}
		w, known := q.waiting[e.Offset]
		if !known {
			w = waiting{lazy: true}
		}
		w.count, w.failed = e.DeliveryCount, e.Failed
		kept[e.Offset] = w
		returned = append(returned, e.Offset) // the index lists in offset order
		return true
	})
	if err != nil {
		return err
	}
	q.waiting, q.returned = kept, returned
	if q.prioritized() {
		q.loadWaiting(ctx)
		slices.SortFunc(q.returned, q.cmpReturned)
	}
	if q.feat.bytes {
		q.countReadyBytes(ctx)
	}
	q.feat.ttl = q.feat.ttl || len(q.returned) > 0
	return nil
}

// reload follows a ChangeReset (the replica was replaced): the cursor,
// the tail and the returned set are read again.
func (sh *sharedClaimer) reload(ctx context.Context) error {
	if err := sh.resync(ctx, true); err != nil {
		return err
	}
	return sh.countTail(ctx)
}

// countTail sets tail to the cursor plus the live records at or beyond
// it: records there are dense.
func (sh *sharedClaimer) countTail(ctx context.Context) error {
	q := sh.q
	var n uint64
	if err := q.eachRecord(ctx, q.cursor, ^uint64(0), func(batch []storage.Record) error {
		n += uint64(len(batch))
		return nil
	}); err != nil {
		return err
	}
	sh.counted(n)
	return nil
}

// counted keeps the larger of the tail and cursor + n: records at and
// beyond the cursor are dense, and the tail only grows.
func (sh *sharedClaimer) counted(n uint64) {
	sh.tail = max(sh.tail, sh.q.cursor+n)
	sh.syncReady()
}

// recover is Start's recovery in shared mode. Other brokers work on
// the same queue meanwhile, so it writes only what belongs to this
// broker: its deliveries from another incarnation are returned; other
// brokers' Delivered entries are theirs; nothing is deleted (no stale
// entries, no orphan records, no transient drop).
func (sh *sharedClaimer) recover(ctx context.Context) error {
	q := sh.q
	s := q.cfg.Stores
	cursor, err := s.Cursors.Offset(ctx, q.key)
	if err != nil {
		return err
	}
	q.cursor = cursor
	if err := sh.countTail(ctx); err != nil {
		return err
	}
	var back []unacked.Entry
	if err := s.Index.Queue(ctx, q.cfg.VHost, q.cfg.Name, func(e unacked.Entry) bool {
		switch {
		case e.State == unacked.Returned:
		case e.Broker == q.cfg.Broker && e.Incarnation != q.cfg.Incarnation:
			e.State = unacked.Returned
			back = append(back, e)
		default:
			return true // another broker's delivery
		}
		q.setWaiting(e.Offset, waiting{count: e.DeliveryCount, failed: e.Failed, lazy: true})
		q.returned = append(q.returned, e.Offset)
		return true
	}); err != nil {
		return err
	}
	if len(back) > 0 {
		if err := s.Index.Put(ctx, back); err != nil {
			return err
		}
	}
	if q.prioritized() {
		q.loadWaiting(ctx)
		slices.SortFunc(q.returned, q.cmpReturned)
	}
	return nil
}

// appended makes an appended batch ready: the tail moves to its end, and
// the records are cached when they extend the cached run from the cursor
// (others may have appended in between).
func (sh *sharedClaimer) appended(recs []storage.Record) {
	q := sh.q
	if len(recs) == 0 {
		return
	}
	sh.tail = max(sh.tail, recs[len(recs)-1].Offset+1)
	next := q.cursor
	if n := len(q.pending); n > 0 {
		next = q.pending[n-1].Offset + 1
	}
	if recs[0].Offset == next && q.pendingFits(recs) {
		q.appendPending(recs)
	}
	sh.syncReady()
}

// heldState is Delivered: a Returned entry is anybody's to take, so a
// message this broker dead-letters stays Delivered to it (Connection "").
func (sh *sharedClaimer) heldState() unacked.State { return unacked.Delivered }

// hold claims returned messages removeHead is about to dead-letter: they
// are the pool's until a claim takes them (entries Delivered to this
// broker, so nobody else serves them meanwhile). On a lost claim or an
// error they go back to the returned set and it reports false.
func (sh *sharedClaimer) hold(ctx context.Context, recs []storage.Record, counts []uint32) bool {
	q := sh.q
	now := q.cfg.Clock.Now().UnixNano()
	entries := make([]unacked.Entry, len(recs))
	taken := make([]unacked.Key, len(recs))
	for i := range recs {
		entries[i] = q.entry(recs[i].Offset, Owner{}, now, counts[i])
		taken[i] = entries[i].Key
	}
	err := sh.commit(ctx, claimWrite{entries: entries, taken: taken})
	if err == nil {
		return true
	}
	for i := range recs {
		q.setWaiting(recs[i].Offset, waiting{rec: recs[i], count: counts[i]})
		q.insertReturned(recs[i].Offset)
		q.becameReady(&recs[i])
	}
	if errors.Is(err, errLostClaim) {
		sh.lost(ctx, true)
	} else {
		q.cfg.Logger.Error("dead-letter claim failed", "queue", q.cfg.Name, "err", err)
		q.scheduleRetry()
	}
	return false
}

// unhold puts a message this broker owns without a delivery (a
// dead-lettering whose target failed) back into the shared pool: its
// entry becomes Returned, for any broker to serve.
func (sh *sharedClaimer) unhold(ctx context.Context, r storage.Record) {
	q := sh.q
	now := q.cfg.Clock.Now().UnixNano()
	e := q.entry(r.Offset, Owner{}, now, 0)
	e.State = unacked.Returned
	entries := []unacked.Entry{e}
	if err := q.cfg.Stores.Index.Put(ctx, entries); err != nil {
		// The entries stay Delivered to this broker: this broker's next
		// start returns them (a duplicate at worst, never a loss).
		q.cfg.Logger.Error("return after dead-letter failed", "queue", q.cfg.Name, "err", err)
		return
	}
	q.setWaiting(r.Offset, waiting{rec: r})
	q.insertReturned(r.Offset)
	q.becameReady(&r)
	q.feat.ttl = true
}

// requeueForeign is RequeueEntries for entries this actor does not hold:
// deliveries of a dead broker (or of this broker's earlier incarnation)
// that the scanner hands over. Each entry that is still exactly as the
// scanner saw it is written Returned with its delivery count, so every
// broker may serve it (redelivered); the others were settled or moved on
// meanwhile and are left alone.
func (sh *sharedClaimer) requeueForeign(ctx context.Context, es []unacked.Entry) {
	q := sh.q
	var back []unacked.Entry
	for _, e := range es {
		if e.VHost != q.cfg.VHost || e.Queue != q.cfg.Name || e.State != unacked.Delivered {
			continue
		}
		if _, held := q.feat.leaving[e.Offset]; held {
			continue // this broker is dead-lettering it
		}
		cur, err := q.cfg.Stores.Index.Get(ctx, e.Key)
		if err != nil || cur != e {
			continue // settled, or not the delivery the scanner saw
		}
		e.State = unacked.Returned
		back = append(back, e)
	}
	if len(back) == 0 {
		return
	}
	if err := q.cfg.Stores.Index.Put(ctx, back); err != nil {
		// Still Delivered to a dead owner: the scanner offers them again.
		q.cfg.Logger.Error("requeue of foreign entries failed", "queue", q.cfg.Name, "err", err)
		return
	}
	for _, e := range back {
		if _, known := q.waiting[e.Offset]; !known {
			q.joinPool(ctx, e.Offset, e.DeliveryCount)
		}
	}
}

// purge is Purge in shared mode: one claim takes everything this
// broker sees as ready (the cursor moves to its tail, the returned set is
// taken with entries of its own), then the records and those entries are
// deleted. Other brokers catch up through ChangeCursor and ChangeTaken;
// messages appended elsewhere that this broker had not seen yet stay.
func (sh *sharedClaimer) purge(ctx context.Context) (uint64, error) {
	q := sh.q
	s := q.cfg.Stores
	for lost := 0; ; lost++ {
		now := q.cfg.Clock.Now().UnixNano()
		taken := make([]unacked.Key, len(q.returned))
		entries := make([]unacked.Entry, len(q.returned))
		for i, off := range q.returned {
			entries[i] = q.entry(off, Owner{}, now, q.waiting[off].count)
			entries[i].Failed = q.waiting[off].failed
			taken[i] = entries[i].Key
		}
		from, to := q.cursor, sh.tail
		err := sh.commit(ctx, claimWrite{entries: entries, taken: taken, move: to != from, to: to})
		if errors.Is(err, errLostClaim) && lost < maxLostClaims {
			sh.lost(ctx, true)
			continue
		}
		if err != nil {
			return 0, err
		}
		offsets := slices.Clone(q.returned)
		n := uint64(len(offsets))
		q.returned = nil
		clear(q.waiting)
		q.emptyPending()
		sh.syncReady()
		q.feat.readyBytes = 0
		err = q.eachRecord(ctx, from, to, func(batch []storage.Record) error {
			for _, r := range batch {
				offsets = append(offsets, r.Offset)
			}
			return nil
		})
		n += to - from
		if err == nil && len(offsets) > 0 {
			err = s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, offsets)
		}
		if err == nil && len(taken) > 0 {
			err = s.Index.Delete(ctx, taken)
		}
		if err != nil {
			// Claimed already: nobody serves them; what is left is
			// garbage below the cursor, or entries this broker's next
			// start returns.
			return n, fmt.Errorf("queue: purge %s: %w", q.cfg.Name, err)
		}
		return n, nil
	}
}
