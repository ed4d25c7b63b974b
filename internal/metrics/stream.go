package metrics

// writeStreams writes each stream's log gauges, labelled vhost and queue
// (per-object scrapes only: the values mean nothing summed). RabbitMQ
// has no AMQP-side equivalent; the names are Warren's.
func writeStreams(p sink, qs []Queue) {
	for _, m := range []struct {
		name, help string
		v          func(*Stream) float64
	}{
		{"warren_stream_first_offset", "The lowest offset a stream holds.", func(s *Stream) float64 { return float64(s.FirstOffset) }},
		{"warren_stream_last_offset", "The highest offset a stream holds.", func(s *Stream) float64 { return float64(s.LastOffset) }},
		{"warren_stream_bytes", "Bytes a stream's messages count toward x-max-length-bytes.", func(s *Stream) float64 { return float64(s.Bytes) }},
		{"warren_stream_segments", "Segments of a stream.", func(s *Stream) float64 { return float64(s.Segments) }},
	} {
		first := true
		for i := range qs {
			q := &qs[i]
			if q.Stream == nil {
				continue
			}
			if first {
				p.family(m.name, "gauge", m.help)
				first = false
			}
			p.sample(m.name, m.v(q.Stream), label2("vhost", q.VHost, "queue", q.Name))
		}
	}
}
