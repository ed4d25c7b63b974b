package queue

import (
	"context"
	"slices"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// Recovery: Start's rebuild of the actor's view from what an earlier run
// left in the stores.

// recover is Start's recovery on a single node: every index entry below
// the cursor becomes Returned, entries at or beyond it never committed and
// are dropped, records below the cursor without an entry (no-ack
// deliveries whose delete was lost) are deleted, and DropTransient removes
// non-persistent records.
func (l *localClaimer) recover(ctx context.Context) error {
	q := l.q
	s := q.cfg.Stores
	cursor, err := s.Cursors.Offset(ctx, q.key)
	if err != nil {
		return err
	}
	// A cursor beyond an empty shard's next offset belongs to an earlier
	// queue of this name; without the reset new messages would be skipped.
	if total, err := s.Shards.Count(ctx, q.cfg.Shard); err == nil && total == 0 {
		next, err := s.Shards.FirstOffset(ctx, q.cfg.Shard)
		if err != nil {
			return err
		}
		if cursor > next {
			if _, err := s.Cursors.CompareAndSwapOffset(ctx, q.key, cursor, next); err != nil {
				return err
			}
			cursor = next
		}
	}
	q.cursor = cursor
	if q.cfg.DropTransient {
		if err := q.dropTransient(ctx); err != nil {
			return err
		}
	}
	var entries []unacked.Entry
	if err := s.Index.Queue(ctx, q.cfg.VHost, q.cfg.Name, func(e unacked.Entry) bool {
		entries = append(entries, e)
		return true
	}); err != nil {
		return err
	}
	// Below the cursor every live record must have an index entry (the
	// entry is written before the cursor moves). Records without one were
	// settled by a no-ack delivery that crashed before deleting them.
	claimed := make(map[uint64]unacked.Entry, len(entries))
	var stale []unacked.Key
	for _, e := range entries {
		if e.Offset >= cursor {
			stale = append(stale, e.Key) // the claim's CAS never happened
			continue
		}
		claimed[e.Offset] = e
	}
	var orphans []uint64
	var back []unacked.Entry
	if err := q.eachRecord(ctx, 0, cursor, func(batch []storage.Record) error {
		for _, r := range batch {
			e, ok := claimed[r.Offset]
			if !ok {
				orphans = append(orphans, r.Offset)
				continue
			}
			delete(claimed, r.Offset)
			w := waiting{rec: r, count: e.DeliveryCount, failed: e.Failed}
			if e.State != unacked.Returned {
				// Out when the broker stopped: its channel was lost, a
				// failed delivery where only those count (quorum.go).
				w.failed = q.msgKind.lostAtStop(w.failed)
				e.Failed = w.failed
				e.State, e.HeldUntil = unacked.Returned, 0
				back = append(back, e)
			}
			if e.HeldUntil > q.cfg.Clock.Now().UnixNano() {
				// Delayed retry held it: it stays held until then.
				q.holdAt(w, e.HeldUntil)
				continue
			}
			q.setWaiting(r.Offset, w)
			q.returned = append(q.returned, r.Offset)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, e := range claimed { // entries whose record is gone: settled before a crash
		stale = append(stale, e.Key)
	}
	if len(orphans) > 0 {
		if err := s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, orphans); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		if err := s.Index.Delete(ctx, stale); err != nil {
			return err
		}
	}
	if len(back) > 0 {
		if err := s.Index.Put(ctx, back); err != nil {
			return err
		}
	}
	total, err := s.Shards.Count(ctx, q.cfg.Shard)
	if err != nil {
		return err
	}
	q.fromCursor = total - uint64(len(q.returned)+len(q.feat.held))
	if q.prioritized() {
		slices.SortFunc(q.returned, q.cmpReturned)
	}
	return nil
}

// eachRecord calls fn with batches of the live records in [from, to).
func (q *Queue) eachRecord(ctx context.Context, from, to uint64, fn func([]storage.Record) error) error {
	for from < to {
		batch, err := q.cfg.Stores.Shards.Read(ctx, q.cfg.Shard, from, 1024)
		if err != nil {
			return err
		}
		n := 0
		for n < len(batch) && batch[n].Offset < to {
			n++
		}
		if n == 0 {
			return nil
		}
		if err := fn(batch[:n]); err != nil {
			return err
		}
		if n < len(batch) {
			return nil
		}
		from = batch[n-1].Offset + 1
	}
	return nil
}

// dropTransient deletes the shard's non-persistent records: in one call
// when the store can find them without reading (storage.TransientDropper,
// so a deep queue of persistent messages starts without reading its
// backlog), else by reading every record.
func (q *Queue) dropTransient(ctx context.Context) error {
	s := q.cfg.Stores
	if d, ok := s.Shards.(storage.TransientDropper); ok {
		_, err := d.DropTransient(ctx, q.cfg.Shard)
		return err
	}
	return q.eachRecord(ctx, 0, ^uint64(0), func(batch []storage.Record) error {
		var drop []uint64
		for _, r := range batch {
			if !r.Persistent {
				drop = append(drop, r.Offset)
			}
		}
		if len(drop) == 0 {
			return nil
		}
		return s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, drop)
	})
}
