package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/storage"
)

// Stream consumers: each one is a reader with its own offset; delivering
// to it reads the log from there and moves it on. Nothing is claimed,
// nothing deleted: an ack only gives the consumer's prefetch credit back
// (the channel does that), as in RabbitMQ, where every settle of a stream
// delivery is credit.

// streamReader is one consumer of a stream.
type streamReader struct {
	c    *Consumer
	next uint64 // the next offset to consider
	// buf holds records read ahead from next on, so a consumer with
	// credit costs one shard Read per readAhead records.
	buf []storage.Record
	// Offset tracking (stream_track.go): ackedTo is the offset past the
	// last acked delivery, savedRec the saved record's offset + 1 (0:
	// none).
	track    bool
	ackedTo  uint64
	savedRec uint64
	// savedSync: the saved record was synced (the consumer's last save).
	savedSync bool
}

// readAhead bounds the records a reader holds: the memory a stream
// costs per consumer, whatever the stream's length.
const readAhead = 128

// maxStreamRound bounds the messages one reader gets before dispatch
// moves to the next, so consumers far behind share the actor fairly.
const maxStreamRound = 64

// addStreamConsumer registers c at the offset its arguments ask for.
func (q *Queue) addStreamConsumer(ctx context.Context, c *Consumer) error {
	if err := q.addConsumer(c); err != nil {
		return err
	}
	s := q.stream
	start, err := s.startOffset(ctx, c.Stream)
	if err != nil {
		q.consumers.remove(c.Owner, c.Tag)
		return err
	}
	r := &streamReader{c: c, next: start}
	if c.Stream != nil && c.Stream.Track {
		s.saveOffsets(ctx) // acks just handled, of this tag too
		off, rec, ok, err := q.trackedOffset(ctx, c.Tag)
		if err != nil {
			q.consumers.remove(c.Owner, c.Tag)
			return err
		}
		if ok {
			r.next = min(max(off, s.first), s.tail)
		}
		r.track, r.ackedTo, r.savedRec = true, r.next, rec
	}
	s.readers = append(s.readers, r)
	return nil
}

// remove drops the readers of owner and tag, saving a tracked reader's
// offset first.
func (s *streamState) remove(ctx context.Context, owner Owner, tag string) {
	s.readers = slices.DeleteFunc(s.readers, func(r *streamReader) bool {
		if r.c.Owner == owner && r.c.Tag == tag {
			// A tracked consumer that leaves has its offset synced,
			// saved again if its last save was not (stream_track.go).
			if _, ok := s.unsaved[r]; ok || r.savedRec != 0 && !r.savedSync {
				s.save(ctx, r, true)
			}
			clear(r.buf)
			return true
		}
		return false
	})
}

// startOffset resolves x-stream-offset against the log, as RabbitMQ
// 4.x's osiris reader does: first is the head; next the tail; last the
// last message (see docs/streams.md); an offset is clamped to
// [first, tail]; a time (startTime) is the first message dated at or
// after it: the head when it is before every message, next when after.
func (s *streamState) startOffset(ctx context.Context, sc *StreamConsume) (uint64, error) {
	if sc == nil {
		return s.tail, nil
	}
	switch sc.Kind {
	case OffsetFirst:
		return s.first, nil
	case OffsetLast:
		if s.tail > s.first {
			return s.tail - 1, nil
		}
		return s.tail, nil
	case OffsetAt:
		return min(max(sc.Offset, s.first), s.tail), nil
	case OffsetTime:
		return s.byTime(ctx, sc.startTime(s.q.cfg.Clock.Now().UnixNano()))
	}
	return s.tail, nil
}

// byTime finds the first message dated at or after ns: the first segment
// whose newest message is (osiris's timestamp_idx_file_search), then the
// record within it; the tail when there is none.
func (s *streamState) byTime(ctx context.Context, ns int64) (uint64, error) {
	i, _ := slices.BinarySearchFunc(s.segs, ns, func(g segment, t int64) int {
		if g.newest < t {
			return -1
		}
		return 1
	})
	if i == len(s.segs) {
		return s.tail, nil
	}
	g := s.segs[i]
	if g.oldest >= ns {
		return g.first, nil
	}
	found := s.tail
	err := s.q.eachRecord(ctx, g.first, g.last+1, func(recs []storage.Record) error {
		for j := range recs {
			if s.dated(&recs[j]) >= ns {
				found = recs[j].Offset
				return errFound
			}
		}
		return nil
	})
	if err == errFound {
		err = nil
	}
	return found, err
}

// errFound stops eachRecord once byTime found its record.
var errFound = errors.New("found")

// streamDispatch delivers to every reader with credit the records from
// its offset on, a bounded round each in turn, until nobody can take more.
func (q *Queue) streamDispatch(ctx context.Context) {
	s := q.stream
	s.saveOffsets(ctx)
	for progress := true; progress && len(s.readers) > 0; {
		progress = false
		n := len(s.readers)
		start := s.rr % n
		s.rr++
		for i := 0; i < n && i < len(s.readers); i++ {
			r := s.readers[(start+i)%len(s.readers)]
			sent, gone := q.streamRound(ctx, r)
			if gone {
				c := r.c
				s.remove(ctx, c.Owner, c.Tag)
				q.consumers.remove(c.Owner, c.Tag)
				continue
			}
			progress = progress || sent > 0
		}
		q.flushReceivers()
	}
}

// streamRound delivers up to maxStreamRound records to r. gone reports a
// consumer whose channel refused a delivery (it is closing).
func (q *Queue) streamRound(ctx context.Context, r *streamReader) (sent int, gone bool) {
	s := q.stream
	c := r.c
	if len(r.buf) > 0 && r.buf[0].Offset < s.first {
		// Retention removed what the reader had read ahead: it resumes
		// at the new head, as a RabbitMQ consumer behind retention does.
		clear(r.buf)
		r.buf = r.buf[:0]
		r.next = s.first
	}
	for sent < maxStreamRound && r.next < s.tail {
		if len(r.buf) == 0 {
			if !q.fillReader(ctx, r) {
				return sent, false
			}
			if len(r.buf) == 0 {
				continue // what was left of the log was filtered out or gone
			}
		}
		if !c.acquire() {
			return sent, false
		}
		rec := r.buf[0]
		r.buf[0] = storage.Record{}
		r.buf = r.buf[1:]
		r.next = rec.Offset + 1
		q.claims++
		m := Message{
			Record:        rec,
			DeliveryCount: 1,
			Ref:           Ref{Offset: rec.Offset, Claim: q.claims},
		}
		m.Properties = withStreamOffset(rec.Properties, rec.Offset)
		if !c.Receiver.Deliver(c, m) {
			c.release()
			return sent, true
		}
		q.noteFlush(c)
		q.countDelivery(false, c.NoAck, false)
		if r.track {
			if s.tracked == nil {
				s.tracked = make(map[uint64]*streamReader)
			}
			s.tracked[m.Ref.Claim] = r
		}
		sent++
	}
	return sent, false
}

// fillReader reads the next records of r's log, keeping those its filter
// accepts; false means the store failed (the retry comes back).
func (q *Queue) fillReader(ctx context.Context, r *streamReader) bool {
	s := q.stream
	if r.next < s.first {
		r.next = s.first // retention passed it: resume at the new head
	}
	recs, err := q.cfg.Stores.Shards.Read(ctx, q.cfg.Shard, r.next, readAhead)
	if err != nil {
		q.cfg.Logger.Error("stream read failed", "queue", q.cfg.Name, "err", err)
		q.scheduleRetry()
		return false
	}
	// Only what the actor knows is stored (and so confirmed) goes out.
	for len(recs) > 0 && recs[len(recs)-1].Offset >= s.tail {
		recs = recs[:len(recs)-1]
	}
	if len(recs) == 0 {
		r.next = s.tail
		return true
	}
	r.next = recs[len(recs)-1].Offset + 1
	if f := r.c.Stream; f != nil && f.Filters != nil {
		kept := recs[:0]
		for _, rec := range recs {
			if f.accepts(rec.Properties) {
				kept = append(kept, rec)
			}
		}
		clear(recs[len(kept):])
		recs = kept
	}
	if len(recs) > 0 {
		// next is where delivery resumes: the first buffered record.
		r.next = recs[0].Offset
	}
	r.buf = append(r.buf[:0], recs...)
	return true
}

// accepts reports whether a message with these properties passes the
// consumer's filter: its x-stream-filter-value is one of the filters, or
// it has none and the consumer matches unfiltered messages. RabbitMQ's
// filter is a Bloom filter per chunk and may let others through, so its
// clients filter again; Warren's is exact.
func (sc *StreamConsume) accepts(props []byte) bool {
	p, err := amqp.DecodeProperties(props)
	if err != nil {
		return sc.MatchUnfiltered
	}
	v, ok := p.Headers["x-stream-filter-value"].(string)
	if !ok {
		return sc.MatchUnfiltered
	}
	return slices.Contains(sc.Filters, v)
}

// streamOffsetEntry is the header table entry withStreamOffset adds:
// the short string key, the type 'l' (long) and 8 bytes of value.
const streamOffsetEntry = 1 + len("x-stream-offset") + 1 + 8

// withStreamOffset adds the x-stream-offset header (a long, as RabbitMQ
// sends it) to a message's properties. Every delivery of a stream pays
// it, so it splices the entry into the encoded properties (one
// allocation, nothing decoded) and decodes and re-encodes them only when
// they already name the header or use flag continuation words.
func withStreamOffset(raw []byte, off uint64) []byte {
	const contentType, contentEncoding, headers = 1 << 15, 1 << 14, 1 << 13
	if len(raw) < 2 {
		return withStreamOffsetSlow(raw, off)
	}
	flags := uint16(raw[0])<<8 | uint16(raw[1])
	if flags&1 != 0 {
		return withStreamOffsetSlow(raw, off)
	}
	pos := 2
	for _, bit := range [...]uint16{contentType, contentEncoding} {
		if flags&bit != 0 {
			if pos >= len(raw) {
				return withStreamOffsetSlow(raw, off)
			}
			pos += 1 + int(raw[pos])
		}
	}
	if pos > len(raw) {
		return withStreamOffsetSlow(raw, off)
	}
	out := make([]byte, 0, len(raw)+4+streamOffsetEntry)
	if flags&headers == 0 {
		out = append(out, byte((flags|headers)>>8), byte(flags|headers))
		out = append(out, raw[2:pos]...)
		out = binary.BigEndian.AppendUint32(out, uint32(streamOffsetEntry))
		out = appendStreamOffset(out, off)
		return append(out, raw[pos:]...)
	}
	if pos+4 > len(raw) {
		return withStreamOffsetSlow(raw, off)
	}
	n := int(binary.BigEndian.Uint32(raw[pos:]))
	end := pos + 4 + n
	if end > len(raw) || bytes.Contains(raw[pos+4:end], []byte("\x0fx-stream-offset")) {
		return withStreamOffsetSlow(raw, off)
	}
	out = append(out, raw[:pos]...)
	out = binary.BigEndian.AppendUint32(out, uint32(n+streamOffsetEntry))
	out = append(out, raw[pos+4:end]...)
	out = appendStreamOffset(out, off)
	return append(out, raw[end:]...)
}

func appendStreamOffset(out []byte, off uint64) []byte {
	out = append(out, byte(len("x-stream-offset")))
	out = append(out, "x-stream-offset"...)
	out = append(out, 'l')
	return binary.BigEndian.AppendUint64(out, off)
}

// withStreamOffsetSlow is withStreamOffset through decoded properties.
func withStreamOffsetSlow(raw []byte, off uint64) []byte {
	return amqp.SetHeaders(raw, amqp.Table{"x-stream-offset": int64(off)})
}

// stats returns a stream's counts: every message it holds is ready
// (none is ever taken), and the deliveries its consumers have not
// settled are unacked.
func (s *streamState) stats() Stats {
	st := Stats{Ready: s.count(), Consumers: s.q.consumers.len()}
	for _, r := range s.readers {
		if r.c.Credit != nil {
			st.Unacked += uint64(max(r.c.Credit.Used(), 0))
		}
	}
	return st
}

// execStream runs the ops a stream handles its own way; done is false for
// the others (publish, stats, delete, inspect), which run as for any
// queue.
func (q *Queue) execStream(ctx context.Context, o op) (r reply, done bool) {
	switch o.kind {
	case opPublish:
		// Every stream message is kept until retention removes it, so it
		// is stored durably whatever its delivery mode (RabbitMQ's
		// streams persist every message): a confirm means on disk.
		o.rec.Persistent = true
		q.stampStream(&o)
		q.publishes = append(q.publishes, o.rec)
		q.confirms = append(q.confirms, confirm{conf: o.conf, seq: o.seq})
		if len(q.publishes) >= maxBatch {
			if q.committing && len(q.publishes) >= maxBacklog {
				q.awaitCommit(ctx)
			}
			q.startCommit(ctx)
		}
		return r, true
	case opAck, opReject, opRequeue, opRequeueEntries:
		// Every settle is credit, which the channel gave back already;
		// an ack moves a tracked consumer's offset (stream_track.go).
		refs := o.refs
		if o.one {
			refs = o.ref[:]
		}
		if o.kind == opAck {
			q.stream.acked(refs)
		} else {
			q.stream.forget(refs)
		}
		if o.kind == opRequeue || o.kind == opRequeueEntries {
			q.requeuing.Add(-1)
		}
		return r, true
	case opConsume:
		q.flushPublishes(ctx)
		q.claimer.catchUp(ctx)
		r.err = q.addStreamConsumer(ctx, o.consumer)
		return r, true
	case opCancel:
		q.stream.remove(ctx, o.owner, o.tag)
		q.consumers.remove(o.owner, o.tag)
		r.stats.Consumers = q.consumers.len()
		return r, true
	case opGet:
		r.err = ErrNotSupported
		return r, true
	case opPurge:
		r.err = ErrNotSupported
		return r, true
	case opRetention:
		q.stream.ageTimer = nil
		q.stream.ageAt = 0
		q.stream.retain(ctx)
		return r, true
	case opTouch, opUnused, opTimer:
		return r, true
	case opDelete:
		q.flushPublishes(ctx)
		n := q.stream.count()
		if err := q.cfg.Stores.Shards.DeleteShard(ctx, q.trackShard()); err != nil {
			r.err = err
			return r, true
		}
		q.stream.readers, q.stream.tracked, q.stream.unsaved = nil, nil, nil
		_, r.err = q.deleteAll(ctx)
		r.n = n
		return r, true
	}
	return r, false
}
