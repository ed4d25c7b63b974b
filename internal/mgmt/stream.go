package mgmt

// streamJSON is what a stream adds to its queue object: RabbitMQ 4.x's
// committed_offset and segments, plus Warren's first and last offsets,
// size and each consumer's next offset (docs/streams.md).
type streamJSON struct {
	CommittedOffset uint64             `json:"committed_offset"`
	FirstOffset     uint64             `json:"first_offset"`
	LastOffset      uint64             `json:"last_offset"`
	Segments        int                `json:"segments"`
	Bytes           int64              `json:"stream_bytes"`
	Readers         []streamReaderJSON `json:"stream_readers"`
}

type streamReaderJSON struct {
	ConsumerTag string `json:"consumer_tag"`
	Connection  string `json:"connection"`
	Channel     uint16 `json:"channel"`
	Offset      uint64 `json:"offset"`
}

// withStream marks a stream's queue object type "stream" (RabbitMQ's
// word) and adds its log; other queues pass unchanged.
func (j queueJSON) withStream(s *Stream) queueJSON {
	if s == nil {
		return j
	}
	j.Type = "stream"
	// Unsettled deliveries are still in the stream: messages counts what
	// it holds, as RabbitMQ's does.
	j.Messages = j.MessagesReady
	sj := &streamJSON{CommittedOffset: s.LastOffset, FirstOffset: s.FirstOffset, LastOffset: s.LastOffset,
		Segments: s.Segments, Bytes: s.Bytes, Readers: []streamReaderJSON{}}
	for _, r := range s.Readers {
		sj.Readers = append(sj.Readers, streamReaderJSON{ConsumerTag: r.Tag, Connection: r.Connection, Channel: r.Channel, Offset: r.Offset})
	}
	j.streamJSON = sj
	return j
}
