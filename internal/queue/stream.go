package queue

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// Streams (x-queue-type stream): the queue's shard is a log that
// consumers read without taking anything from it, each from its own
// offset (stream_consume.go). The actor keeps what the log holds as
// segments, and retention removes whole segments from the head. See
// docs/streams.md for what each choice copies from RabbitMQ 4.x.
//
// Every message is dated when the queue accepts it (stampStream), and a
// segment keeps the oldest and newest date of its records. Retention by
// age removes a closed segment at the head once its newest message is
// older than x-max-age (osiris_log's eval_age), so no message younger
// than the age ever goes; x-stream-offset times are found through the
// same dates (byTime). Time arithmetic saturates (addClamped): no
// argument, policy or stored date makes it wrap.
//
// A segment is a run of consecutive offsets: it closes once it holds
// StreamArgs.SegmentBytes bytes (each record counts its properties and
// body), and the next record opens a new one. Segments are not stored:
// Start rebuilds them by reading the log from its first record, packing
// records the same way, so the boundaries come out where they were (the
// head is only ever removed a whole segment at a time). The open (last)
// segment is never removed, as in RabbitMQ.

// ErrNotSupported is returned by operations a stream refuses: queue.purge
// and basic.get (RabbitMQ answers 540 NOT_IMPLEMENTED to both).
var ErrNotSupported = errors.New("queue: not supported by stream queues")

// segment is a run of offsets of a stream: [first, last].
type segment struct {
	first, last uint64
	n           uint64
	bytes       int64
	// newest and oldest are the latest and earliest date of its records
	// (dated), Unix nanoseconds: in offset order dates may step back a
	// little (publishes are dated when their bytes arrived, on each
	// connection's goroutine), so neither is simply the last or first.
	newest, oldest int64
}

// streamState is a stream's log view and its readers, owned by the
// state token's holder (the actor).
type streamState struct {
	q    *Queue
	segs []segment
	// first is the lowest offset the stream holds, tail the offset the
	// next append gets; the records in between are dense.
	first, tail uint64
	bytes       int64
	readers     []*streamReader
	rr          int // the reader dispatch starts with (round robin)
	// tracked maps the claim of each unsettled delivery to a tracking
	// reader to that reader; unsaved holds the readers (current or gone)
	// whose offset moved since it was saved (stream_track.go).
	tracked map[uint64]*streamReader
	unsaved map[*streamReader]struct{}
	// Shared mode: the highest tail another broker's append was seen to
	// reach (Observe), applied by catchUp.
	maxTail atomic.Uint64
	// retention timer for x-max-age, armed for the oldest closed segment
	ageTimer clock.Timer
	ageAt    int64
	// segBytes is the segment size, fixed when the stream was created
	// (stream_policy.go).
	segBytes int64
	// undated is the date of records stored without one (dated): when
	// this actor started.
	undated int64
}

// IsStream reports whether the queue is a stream.
func (q *Queue) IsStream() bool { return q.stream != nil }

// streamClaimer is the claimer of a stream: nothing is ever claimed (no
// cursor moves, no index entry is written); appends extend the log view.
type streamClaimer struct{ s *streamState }

var _ claimer = (*streamClaimer)(nil)

// commit is never called: dispatch and get of a stream claim nothing.
func (c *streamClaimer) commit(context.Context, claimWrite) error {
	return ErrNotSupported
}
func (c *streamClaimer) lost(context.Context, bool)                            {}
func (c *streamClaimer) counted(uint64)                                        {}
func (c *streamClaimer) hold(context.Context, []storage.Record, []uint32) bool { return false }
func (c *streamClaimer) heldState() unacked.State                              { return unacked.Delivered }
func (c *streamClaimer) unhold(context.Context, storage.Record)                {}
func (c *streamClaimer) requeueForeign(context.Context, []unacked.Entry)       {}
func (c *streamClaimer) purge(context.Context) (uint64, error)                 { return 0, ErrNotSupported }

// recover reads the log once to rebuild its segments.
func (c *streamClaimer) recover(ctx context.Context) error {
	s := c.s
	s.undated = s.q.cfg.Clock.Now().UnixNano()
	if err := s.loadSegmentBytes(ctx); err != nil {
		return err
	}
	first, err := s.q.cfg.Stores.Shards.FirstOffset(ctx, s.q.cfg.Shard)
	if err != nil {
		return err
	}
	s.first, s.tail = first, first
	return s.index(ctx, first, ^uint64(0))
}

// index reads the records at [from, to) and adds them to the segments.
func (s *streamState) index(ctx context.Context, from, to uint64) error {
	return s.q.eachRecord(ctx, from, to, func(recs []storage.Record) error {
		s.add(recs)
		return nil
	})
}

// appended adds a batch this actor stored.
func (c *streamClaimer) appended(recs []storage.Record) {
	c.s.add(recs)
}

// catchUp reads what other brokers appended (shared mode).
func (c *streamClaimer) catchUp(ctx context.Context) {
	s := c.s
	t := s.maxTail.Load()
	if t <= s.tail {
		return
	}
	if err := s.index(ctx, s.tail, t); err != nil {
		s.q.cfg.Logger.Error("stream catch-up failed", "queue", s.q.cfg.Name, "err", err)
		s.q.scheduleRetry()
		return
	}
	// Records at [tail, t) may be gone already (another broker's
	// retention): the log is known up to t either way.
	if s.tail < t {
		s.tail = t
		if len(s.segs) == 0 {
			s.first = t
		}
	}
}

// observe records another broker's append (Observe, any goroutine).
func (s *streamState) observe(c meta.Change) {
	if c.Kind != meta.ChangeAppended || c.Shard != s.q.cfg.Shard {
		return
	}
	storeMax(&s.maxTail, c.Offset)
	s.q.Kick()
}

// stampStream dates a publish to the stream: when the queue accepted it
// (o.at, set by Publish from the session's read time or the clock), or
// now for a copy another actor posted. A stream takes no TTL, so nothing
// expires.
func (q *Queue) stampStream(o *op) {
	if o.at == 0 {
		o.at = q.cfg.Clock.Now().UnixNano()
	}
	o.rec.EnqueuedAt, o.rec.ExpiresAt = o.at, 0
}

// dated is the date retention and time offsets take for r: its
// EnqueuedAt, or, for a record stored without one (by a Warren that did
// not date stream messages, which left 0), when this actor started. Such
// a message counts as young rather than 56 years old: it goes x-max-age
// after the first start that read it, never before.
func (s *streamState) dated(r *storage.Record) int64 {
	if r.EnqueuedAt == 0 {
		return s.undated
	}
	return r.EnqueuedAt
}

// addClamped is a+b, saturated to the range of int64.
func addClamped(a, b int64) int64 {
	c := a + b
	switch {
	case b > 0 && c < a:
		return math.MaxInt64
	case b < 0 && c > a:
		return math.MinInt64
	}
	return c
}

// recordBytes is what a record counts toward segment and retention sizes.
func recordBytes(r *storage.Record) int64 {
	return int64(len(r.Properties) + len(r.Body))
}

// add appends records (in offset order, past the tail) to the segments.
func (s *streamState) add(recs []storage.Record) {
	limit := s.segBytes
	for i := range recs {
		r := &recs[i]
		if r.Offset < s.tail {
			continue // seen already
		}
		if len(s.segs) == 0 {
			s.first = r.Offset
		}
		b := recordBytes(r)
		at := s.dated(r)
		if n := len(s.segs); n == 0 || s.segs[n-1].bytes >= limit {
			s.segs = append(s.segs, segment{first: r.Offset, oldest: at, newest: at})
		}
		g := &s.segs[len(s.segs)-1]
		g.last = r.Offset
		g.newest, g.oldest = max(g.newest, at), min(g.oldest, at)
		g.n++
		g.bytes += b
		s.bytes += b
		s.tail = r.Offset + 1
	}
}

// count is the number of messages the stream holds.
func (s *streamState) count() uint64 {
	var n uint64
	for i := range s.segs {
		n += s.segs[i].n
	}
	return n
}

// retain removes whole segments from the head while the stream is over
// x-max-length-bytes or their newest message is older than x-max-age,
// never the open segment; then it arms the age timer for the next one.
// This is osiris_log's evaluate_retention with both limits (max_bytes,
// then max_age, each dropping a prefix of the segments, come to the same
// prefix as one pass that drops while either holds). osiris evaluates it
// when a segment fills, when the retention changes and, with a max age,
// hourly; the actor does after every batch of ops (dispatch) and when the
// age timer fires, so a segment goes as soon as it may, never earlier.
func (s *streamState) retain(ctx context.Context) {
	a := s.q.cfg.Features.Args.StreamArgs
	if a.MaxBytes < 0 && a.MaxAge == 0 {
		return
	}
	// A segment is old when its newest message is older than the age:
	// dated before now minus it (osiris: Ts < Now - Age).
	cutoff := addClamped(s.q.cfg.Clock.Now().UnixNano(), -int64(a.MaxAge))
	drop := 0
	total := s.bytes
	for drop < len(s.segs)-1 {
		g := &s.segs[drop]
		over := a.MaxBytes >= 0 && total > a.MaxBytes
		old := a.MaxAge > 0 && g.newest < cutoff
		if !over && !old {
			break
		}
		total -= g.bytes
		drop++
	}
	if drop > 0 {
		if err := s.deleteSegments(ctx, s.segs[:drop]); err != nil {
			// Some records may be gone: the segments stay, and the retry
			// (dispatch runs retain after it) deletes them all again.
			s.q.cfg.Logger.Error("stream retention failed", "queue", s.q.cfg.Name, "err", err)
			s.q.scheduleRetry()
			return
		}
		s.bytes = total
		s.segs = append(s.segs[:0], s.segs[drop:]...)
		s.first = s.segs[0].first
	}
	s.armAge()
}

// deleteSegments deletes the records of segs from the shard, a bounded
// number of offsets per call.
func (s *streamState) deleteSegments(ctx context.Context, segs []segment) error {
	const chunk = 4096
	offs := make([]uint64, 0, chunk)
	for _, g := range segs {
		for o := g.first; o <= g.last; o++ {
			offs = append(offs, o)
			if len(offs) == chunk || o == g.last {
				if err := s.q.cfg.Stores.Shards.DeleteByOffsets(ctx, s.q.cfg.Shard, offs); err != nil {
					return err
				}
				offs = offs[:0]
			}
		}
	}
	return nil
}

// armAge arms the x-max-age timer for when the oldest closed segment's
// newest message passes the age; never, when that is past what int64
// holds.
func (s *streamState) armAge() {
	a := s.q.cfg.Features.Args.StreamArgs
	if a.MaxAge == 0 || len(s.segs) < 2 {
		return
	}
	at := addClamped(addClamped(s.segs[0].newest, int64(a.MaxAge)), 1)
	if at == math.MaxInt64 {
		return
	}
	if at == s.ageAt && s.ageTimer != nil {
		return
	}
	if s.ageTimer != nil {
		s.ageTimer.Stop()
	}
	s.ageAt = at
	d := time.Duration(at - s.q.cfg.Clock.Now().UnixNano())
	if d <= 0 {
		s.ageTimer = nil
		s.q.post(op{kind: opRetention})
		return
	}
	s.ageTimer = s.q.cfg.Clock.AfterFunc(d, func() { s.q.post(op{kind: opRetention}) })
}

// StreamInfo describes a stream for introspection and the management API.
type StreamInfo struct {
	// FirstOffset is the lowest offset the stream holds, LastOffset the
	// highest (meaningful when Messages > 0); NextOffset is the offset
	// the next message gets.
	FirstOffset, LastOffset, NextOffset uint64
	Messages                            uint64
	Bytes                               int64
	Segments                            int
	Readers                             []StreamReaderInfo
}

// StreamReaderInfo is one consumer of a stream and where it reads.
type StreamReaderInfo struct {
	Tag    string
	Owner  Owner
	Offset uint64 // the next offset it will be sent
}

// StreamInfo returns the stream's offsets, size and readers; ok is false
// for a queue that is not a stream.
func (q *Queue) StreamInfo(ctx context.Context) (info StreamInfo, ok bool, err error) {
	if q.stream == nil {
		return info, false, nil
	}
	err = q.inspect(ctx, func(context.Context) {
		s := q.stream
		info = StreamInfo{FirstOffset: s.first, NextOffset: s.tail, Messages: s.count(), Bytes: s.bytes, Segments: len(s.segs)}
		if s.tail > 0 {
			info.LastOffset = s.tail - 1
		}
		for _, r := range s.readers {
			info.Readers = append(info.Readers, StreamReaderInfo{Tag: r.c.Tag, Owner: r.c.Owner, Offset: r.next})
		}
	})
	return info, true, err
}

// peek returns the first n messages the stream holds, from its head.
func (s *streamState) peek(ctx context.Context, n int) ([]ReadyMessage, error) {
	out := make([]ReadyMessage, 0, min(uint64(n), s.count()))
	err := s.q.eachRecord(ctx, s.first, s.tail, func(recs []storage.Record) error {
		for _, r := range recs {
			if len(out) == n {
				return errFound
			}
			out = append(out, ReadyMessage{Record: r})
		}
		return nil
	})
	if err == errFound {
		err = nil
	}
	return out, err
}
