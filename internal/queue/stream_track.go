package queue

import (
	"context"
	"strconv"

	"github.com/warrenmq/broker/storage"
)

// Server-side offset tracking, as LavinMQ 2.x offers it over AMQP 0-9-1:
// a stream consumer with a consumer tag of its own and x-stream-offset
// null (or x-stream-automatic-offset-tracking true) has the offset past
// its last acked message kept by the broker, and a later consumer with
// the same tag starts there instead of at its x-stream-offset.
//
// The offsets live in a second shard of the queue (trackShard), one
// record per tag (RoutingKey the tag, Body the offset in decimal; records
// with an exchange are the stream's config, stream_policy.go), so
// they are stored and replicated like the stream itself and go with it
// when it is deleted. A save appends the new record and deletes the old
// one. Saves happen once per actor step for the tags whose acks arrived
// in it and are not synced, as RabbitMQ does not sync the offsets it
// tracks in a stream (nor the stream itself: it relies on the OS and on
// replication): a crash may forget the latest acks, and the consumer then
// sees those messages again (at least once), never skips one. The save
// made when a tracked consumer goes (basic.cancel, its channel closing)
// is synced: a consumer that left cleanly resumes exactly where it left
// off, whatever happens to the broker afterwards. That costs one sync per
// departure, never one per ack.

// trackShard is the shard holding a stream's tracked offsets.
func (q *Queue) trackShard() string { return q.cfg.Shard + "\x00offsets" }

// trackedOffset reads the tag's saved offset; rec is its record's offset
// (+1; 0 when none).
func (q *Queue) trackedOffset(ctx context.Context, tag string) (off uint64, rec uint64, ok bool, err error) {
	from := uint64(0)
	for {
		recs, err := q.cfg.Stores.Shards.Read(ctx, q.trackShard(), from, 256)
		if err != nil || len(recs) == 0 {
			return off, rec, ok, err
		}
		for _, r := range recs {
			if r.Exchange != "" || r.RoutingKey != tag {
				continue
			}
			n, perr := strconv.ParseUint(string(r.Body), 10, 64)
			if perr != nil {
				continue
			}
			off, rec, ok = n, r.Offset+1, true
		}
		from = recs[len(recs)-1].Offset + 1
	}
}

// acked notes acks of deliveries to tracked readers, also of readers
// already gone (a consumer may ack after basic.cancel, and a closing
// channel's acks may reach the queue after a delivery refused by it
// removed the reader): saveOffsets saves them all.
func (s *streamState) acked(refs []Ref) {
	for _, ref := range refs {
		r := s.tracked[ref.Claim]
		if r == nil {
			continue
		}
		delete(s.tracked, ref.Claim)
		if ref.Offset+1 > r.ackedTo {
			r.ackedTo = ref.Offset + 1
			if s.unsaved == nil {
				s.unsaved = make(map[*streamReader]struct{})
			}
			s.unsaved[r] = struct{}{}
		}
	}
}

// forget drops the tracking of deliveries that were not acked (requeued:
// the channel closed, or a nack or reject).
func (s *streamState) forget(refs []Ref) {
	for _, ref := range refs {
		delete(s.tracked, ref.Claim)
	}
}

// saveOffsets stores the offsets of the tracked readers acked since the
// last save.
func (s *streamState) saveOffsets(ctx context.Context) {
	for r := range s.unsaved {
		s.save(ctx, r, false)
	}
}

// save stores r's offset and deletes the record it replaces; a failed
// save stays in unsaved for the next step. With sync the record is
// durable when save returns.
func (s *streamState) save(ctx context.Context, r *streamReader, sync bool) {
	q := s.q
	rec := []storage.Record{{RoutingKey: r.c.Tag, Body: strconv.AppendUint(nil, r.ackedTo, 10),
		EnqueuedAt: q.cfg.Clock.Now().UnixNano(), Persistent: sync}}
	if _, err := q.cfg.Stores.Shards.Append(ctx, q.trackShard(), rec); err != nil {
		q.cfg.Logger.Error("stream offset save failed", "queue", q.cfg.Name, "tag", r.c.Tag, "err", err)
		return
	}
	delete(s.unsaved, r)
	if r.savedRec != 0 {
		if err := q.cfg.Stores.Shards.DeleteByOffsets(ctx, q.trackShard(), []uint64{r.savedRec - 1}); err != nil {
			q.cfg.Logger.Error("stream offset delete failed", "queue", q.cfg.Name, "err", err)
		}
	}
	r.savedRec, r.savedSync = rec[0].Offset+1, sync
}
