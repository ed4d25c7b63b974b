package rates

import "time"

// Query asks for history: the samples of the last Age, at most one per
// Incr (RabbitMQ's msg_rates_age and msg_rates_incr, or lengths_age and
// lengths_incr). A zero Age asks for the rate only.
type Query struct {
	Age, Incr time.Duration
}

// Details is RabbitMQ's "<name>_details" object. Samples, AvgRate and Avg
// are there only when history was asked for.
type Details struct {
	Rate    float64  `json:"rate"`
	Samples []Sample `json:"samples,omitempty"`
	AvgRate *float64 `json:"avg_rate,omitempty"`
	Avg     *float64 `json:"avg,omitempty"`
}

// Sample is one recorded value; Timestamp is in milliseconds since the
// Unix epoch.
type Sample struct {
	Sample    uint64 `json:"sample"`
	Timestamp int64  `json:"timestamp"`
}

// Details returns the details of each of the object key's values, in the
// order Record was given them; nil when the object has not been recorded.
// A query with an Age makes the object watched (see the package doc): its
// samples go back to when it was first asked for, or to the two newest.
func (r *Recorder) Details(key string, q Query, now time.Time) []Details {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.objects[key]
	if o == nil {
		return nil
	}
	out := make([]Details, len(o.newest.vals))
	if !o.older.at.IsZero() {
		secs := o.newest.at.Sub(o.older.at).Seconds()
		for i := range out {
			out[i].Rate = (float64(o.newest.vals[i]) - float64(o.older.vals[i])) / secs
		}
	}
	if q.Age <= 0 {
		return out
	}
	if !o.pinned {
		r.watch(key, o, now)
	}
	since := o.newest.at.Add(-q.Age)
	var last time.Time
	// A sample counts as a step of Incr when it is at least Incr less half
	// an interval after the one before: sampling times jitter.
	step := q.Incr - r.cfg.Interval/2
	o.hist.newestFirst(func(at time.Time, vals []uint64) bool {
		if at.Before(since) {
			return false
		}
		if !last.IsZero() && last.Sub(at) < step {
			return true
		}
		last = at
		for i := range out {
			out[i].Samples = append(out[i].Samples, Sample{Sample: vals[i], Timestamp: at.UnixMilli()})
		}
		return true
	})
	for i := range out {
		avgRate, avg := averages(out[i].Samples)
		out[i].AvgRate, out[i].Avg = &avgRate, &avg
	}
	return out
}

// averages returns the change per second over samples (newest first) and
// their mean, zeros for none.
func averages(samples []Sample) (avgRate, avg float64) {
	if len(samples) == 0 {
		return 0, 0
	}
	var sum float64
	for _, s := range samples {
		sum += float64(s.Sample)
	}
	avg = sum / float64(len(samples))
	newest, oldest := samples[0], samples[len(samples)-1]
	if ms := newest.Timestamp - oldest.Timestamp; ms > 0 {
		avgRate = (float64(newest.Sample) - float64(oldest.Sample)) / (float64(ms) / 1000)
	}
	return avgRate, avg
}
