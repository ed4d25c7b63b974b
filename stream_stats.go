package broker

import (
	"context"

	"github.com/warrenmq/broker/internal/vhost"
)

// StreamStats describe a stream (a queue declared with x-queue-type
// stream): what its log holds and where each consumer reads. See
// docs/streams.md.
type StreamStats struct {
	// FirstOffset is the lowest offset the stream holds and LastOffset the
	// highest (both meaningful when Messages > 0); NextOffset is the offset
	// the next message gets.
	FirstOffset, LastOffset, NextOffset uint64
	Messages                            uint64
	// Bytes is what the messages count toward x-max-length-bytes (their
	// properties and bodies); Segments is the number of segments.
	Bytes    int64
	Segments int
	// Consumers are this broker's consumers of the stream and the next
	// offset each will be sent.
	Consumers []StreamConsumerStats
}

// StreamConsumerStats is one consumer of a stream.
type StreamConsumerStats struct {
	Tag        string
	Connection string
	Channel    uint16
	Offset     uint64
}

// streamStatsOf asks a stream's actor for its log view; nil for a queue
// that is not a stream or did not answer.
func streamStatsOf(ctx context.Context, q *vhost.Queue) *StreamStats {
	info, ok, err := q.StreamInfo(ctx)
	if !ok || err != nil {
		return nil
	}
	s := &StreamStats{
		FirstOffset: info.FirstOffset, LastOffset: info.LastOffset, NextOffset: info.NextOffset,
		Messages: info.Messages, Bytes: info.Bytes, Segments: info.Segments,
	}
	for _, r := range info.Readers {
		s.Consumers = append(s.Consumers, StreamConsumerStats{Tag: r.Tag, Connection: r.Owner.Connection, Channel: r.Owner.Channel, Offset: r.Offset})
	}
	return s
}
