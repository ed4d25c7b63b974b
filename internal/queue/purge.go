package queue

import (
	"context"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// Purge and Delete: removing the ready messages, or the whole queue.

// Purge deletes the ready messages (not those out for delivery) and returns
// how many.
func (q *Queue) Purge(ctx context.Context) (uint64, error) {
	r, err := q.call(ctx, op{kind: opPurge})
	return r.n, err
}

// Delete removes every message, index entry and the shard, cancels the
// consumers (Receiver.Cancelled), stops the actor and returns the number of
// ready messages deleted. The cursor is the caller's to delete with the
// queue's metadata.
func (q *Queue) Delete(ctx context.Context) (uint64, error) {
	r, err := q.call(ctx, op{kind: opDelete})
	return r.n, err
}

// purge deletes the ready messages: the returned set and everything from
// the cursor on. Records go first, then the cursor moves past them.
func (l *localClaimer) purge(ctx context.Context) (uint64, error) {
	q := l.q
	s := q.cfg.Stores
	var n uint64
	if len(q.returned) > 0 {
		keys := make([]unacked.Key, len(q.returned))
		for i, off := range q.returned {
			keys[i] = q.indexKey(off)
		}
		if err := s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, q.returned); err != nil {
			return 0, err
		}
		if err := s.Index.Delete(ctx, keys); err != nil {
			return 0, err
		}
		n += uint64(len(q.returned))
		q.returned = nil
		clear(q.waiting)
	}
	last, deleted := q.cursor, uint64(0)
	var err error
	if p, ok := s.Shards.(storage.Purger); ok {
		// The store knows its live offsets: no record is read.
		deleted, last, err = p.PurgeFrom(ctx, q.cfg.Shard, q.cursor)
	} else {
		err = q.purgeByReading(ctx, &last, &deleted)
	}
	q.emptyPending()
	if err != nil {
		q.fromCursor -= min(q.fromCursor, deleted)
		return n + deleted, err
	}
	if last != q.cursor {
		if err := l.commit(ctx, claimWrite{move: true, to: last}); err != nil {
			return n + deleted, err
		}
	}
	q.fromCursor = 0
	q.feat.readyBytes = 0
	return n + deleted, nil
}

// purgeByReading deletes the records from the cursor on, read in batches
// to learn their offsets, for a store that is not a storage.Purger. It
// adds to *deleted as it goes and leaves *last one past the last deleted.
func (q *Queue) purgeByReading(ctx context.Context, last, deleted *uint64) error {
	s := q.cfg.Stores
	return q.eachRecord(ctx, q.cursor, ^uint64(0), func(batch []storage.Record) error {
		offsets := make([]uint64, len(batch))
		for i, r := range batch {
			offsets[i] = r.Offset
		}
		if err := s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, offsets); err != nil {
			return err
		}
		*deleted += uint64(len(batch))
		*last = batch[len(batch)-1].Offset + 1
		return nil
	})
}

func (q *Queue) deleteAll(ctx context.Context) (uint64, error) {
	s := q.cfg.Stores
	ready := q.ready()
	q.consumers.each(func(c *Consumer) { c.Receiver.Cancelled(c) })
	q.consumers.reset()
	// The cursor goes back to 0 first: a queue declared again under this
	// name starts its shard at offset 0, and a crash half-way through must
	// leave old records to deliver again, never a cursor past new ones.
	// The cursor as the store has it: other brokers may have moved a
	// shared queue's since this one looked.
	cur, err := s.Cursors.Offset(ctx, q.key)
	if err != nil {
		return 0, err
	}
	q.cursor = cur
	if q.cursor != 0 {
		if _, err := s.Cursors.CompareAndSwapOffset(ctx, q.key, q.cursor, 0); err != nil {
			return 0, err
		}
	}
	if err := s.Index.DeleteQueue(ctx, q.cfg.VHost, q.cfg.Name); err != nil {
		return 0, err
	}
	if err := s.Shards.DeleteShard(ctx, q.cfg.Shard); err != nil {
		return 0, err
	}
	if q.cfg.OwnCursor {
		if d, ok := s.Cursors.(cursorDeleter); ok {
			if err := d.DeleteQueue(ctx, q.cfg.VHost, q.cfg.Name); err != nil {
				return 0, err
			}
		}
	}
	q.deleted = true
	q.pending, q.pendingArr, q.returned, q.out = nil, nil, nil, nil
	q.dropLeaving()
	clear(q.waiting)
	return ready, nil
}

// cursorDeleter is the part of meta.Topology that deletes a queue's cursor.
type cursorDeleter interface {
	DeleteQueue(ctx context.Context, vhost, name string) error
}
