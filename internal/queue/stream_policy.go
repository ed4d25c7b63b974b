package queue

import (
	"context"
	"strconv"

	"github.com/warrenmq/broker/storage"
)

// A stream's settings under policies (RabbitMQ 4.0's
// rabbit_stream_queue:update_stream_conf and policy_changed):
//
//   - retention (x-max-length-bytes, x-max-age) follows the policy live: a
//     changed policy reaches the actor through SetArgs, which applies the
//     new limits at once (applyStreamArgs);
//   - the segment size is fixed when the stream is created, from the
//     policy if one sets it then, else the argument, and never changes
//     afterwards, also across restarts, whatever later policies say
//     (RabbitMQ 3.13 and later: a stream's segment size only ever comes
//     from its declaration). Warren's segments are rebuilt at every start
//     by packing the log with that size, so the size is stored: as a
//     config record in the stream's offsets shard (stream_track.go), which
//     goes with the stream.

// streamConfExchange marks a config record in a stream's offsets shard;
// tracked offsets have no exchange.
const streamConfExchange = "config"

// segmentBytesKey is the config record of the stream's segment size.
const segmentBytesKey = "stream-max-segment-size-bytes"

// loadSegmentBytes sets the stream's segment size from its config record,
// writing the record (synced: it is written once) with the size the
// stream starts with when there is none yet: a new stream, or one stored
// before the size was recorded.
func (s *streamState) loadSegmentBytes(ctx context.Context) error {
	q := s.q
	from := uint64(0)
	for {
		recs, err := q.cfg.Stores.Shards.Read(ctx, q.trackShard(), from, 256)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if r.Exchange != streamConfExchange || r.RoutingKey != segmentBytesKey {
				continue
			}
			// The first record wins: in a cluster two nodes may both
			// have written one when they started the stream together.
			if n, err := strconv.ParseInt(string(r.Body), 10, 64); err == nil && n > 0 {
				s.segBytes = n
				return nil
			}
		}
		from = recs[len(recs)-1].Offset + 1
	}
	s.segBytes = q.cfg.Features.Args.SegmentBytes
	if s.segBytes <= 0 {
		s.segBytes = DefaultSegmentBytes
	}
	rec := []storage.Record{{Exchange: streamConfExchange, RoutingKey: segmentBytesKey,
		Body: strconv.AppendInt(nil, s.segBytes, 10), Persistent: true, EnqueuedAt: q.cfg.Clock.Now().UnixNano()}}
	_, err := q.cfg.Stores.Shards.Append(ctx, q.trackShard(), rec)
	return err
}

// applyStreamArgs is applyArgs for a stream: new retention limits take
// effect at once (a lowered one removes segments now, a raised one keeps
// what would have gone), and the age timer is re-armed or stopped. The
// segment size stays the one the stream was created with.
func (q *Queue) applyStreamArgs(ctx context.Context, a Args) {
	old := q.cfg.Features.Args
	a.SegmentBytes = old.SegmentBytes
	if a.StreamArgs == old.StreamArgs {
		return
	}
	q.cfg.Features.Args.StreamArgs = a.StreamArgs
	s := q.stream
	if a.MaxAge != old.MaxAge && s.ageTimer != nil {
		s.ageTimer.Stop()
		s.ageTimer, s.ageAt = nil, 0
	}
	s.retain(ctx)
}
