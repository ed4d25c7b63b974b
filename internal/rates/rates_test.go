package rates

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1_700_000_000, 0)

// rounds records, every 5 s from t0, each of vals as key's sample.
func rounds(r *Recorder, key string, pinned bool, vals ...[]uint64) time.Time {
	at := t0
	for i, v := range vals {
		at = t0.Add(time.Duration(i) * 5 * time.Second)
		r.StartRound(at)
		r.Record(key, pinned, 1, v)
		r.EndRound()
	}
	return at
}

func TestRate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples [][]uint64
		want    []float64
	}{
		{"one sample has no rate", [][]uint64{{10, 3}}, []float64{0, 0}},
		{"counter and gauge rising", [][]uint64{{10, 3}, {60, 8}}, []float64{10, 1}},
		{"a gauge falls", [][]uint64{{10, 8}, {10, 3}}, []float64{0, -1}},
		{"the newest two count", [][]uint64{{0, 0}, {100, 0}, {110, 0}}, []float64{2, 0}},
		{"a counter going down starts over", [][]uint64{{100, 0}, {5, 0}}, []float64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Config{})
			now := rounds(r, "q", false, tc.samples...)
			var got []float64
			for _, d := range r.Details("q", Query{}, now) {
				got = append(got, d.Rate)
				require.Nil(t, d.Samples, "no history asked")
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestSamplesOfAPinnedObject(t *testing.T) {
	r := New(Config{})
	now := rounds(r, "broker", true, []uint64{0}, []uint64{5}, []uint64{15}, []uint64{30}, []uint64{50})
	for _, tc := range []struct {
		name    string
		q       Query
		want    []uint64
		avgRate float64
	}{
		{"all of a minute", Query{Age: time.Minute, Incr: 5 * time.Second}, []uint64{50, 30, 15, 5, 0}, 2.5},
		{"the last 10 s", Query{Age: 10 * time.Second, Incr: 5 * time.Second}, []uint64{50, 30, 15}, 3.5},
		{"every other sample", Query{Age: time.Minute, Incr: 10 * time.Second}, []uint64{50, 15, 0}, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := r.Details("broker", tc.q, now)[0]
			var got []uint64
			for i, s := range d.Samples {
				got = append(got, s.Sample)
				if i > 0 {
					require.Less(t, s.Timestamp, d.Samples[i-1].Timestamp, "newest first")
				}
			}
			require.Equal(t, tc.want, got)
			require.InDelta(t, tc.avgRate, *d.AvgRate, 1e-9)
			require.Equal(t, 4.0, d.Rate)
		})
	}
}

// TestWatchedHistoryStartsWhenAsked: an ordinary object keeps two samples
// until history is asked of it, then a full one, until nobody asks for
// WatchFor.
func TestWatchedHistoryStartsWhenAsked(t *testing.T) {
	r := New(Config{WatchFor: 20 * time.Second})
	now := rounds(r, "q", false, []uint64{1}, []uint64{2}, []uint64{3})
	q := Query{Age: time.Minute, Incr: 5 * time.Second}
	require.Len(t, r.Details("q", q, now)[0].Samples, 2, "the two newest only")
	for i := range 3 {
		now = now.Add(5 * time.Second)
		r.StartRound(now)
		r.Record("q", false, 1, []uint64{uint64(4 + i)})
		r.EndRound()
	}
	require.Len(t, r.Details("q", q, now)[0].Samples, 5)
	_, watched := r.Len()
	require.Equal(t, 1, watched)
	for range 5 { // 25 s without a request
		now = now.Add(5 * time.Second)
		r.StartRound(now)
		r.Record("q", false, 1, []uint64{9})
		r.EndRound()
	}
	_, watched = r.Len()
	require.Zero(t, watched, "no longer watched")
}

func TestWatchIsBounded(t *testing.T) {
	r := New(Config{Watch: 2})
	q := Query{Age: time.Minute, Incr: 5 * time.Second}
	r.StartRound(t0)
	for _, k := range []string{"a", "b", "c"} {
		r.Record(k, false, 1, []uint64{1})
	}
	r.EndRound()
	for i, k := range []string{"a", "b", "c"} {
		r.Details(k, q, t0.Add(time.Duration(i)*time.Second))
	}
	objects, watched := r.Len()
	require.Equal(t, 3, objects)
	require.Equal(t, 2, watched)
	require.Nil(t, r.objects["a"].hist, "the one asked for longest ago is evicted")
}

func TestGoneObjectsAreForgotten(t *testing.T) {
	r := New(Config{})
	r.StartRound(t0)
	r.Record("a", false, 1, []uint64{1})
	r.Record("b", false, 1, []uint64{1})
	r.EndRound()
	r.StartRound(t0.Add(5 * time.Second))
	r.Record("b", false, 1, []uint64{2})
	r.EndRound()
	require.Nil(t, r.Details("a", Query{}, t0))
	require.Equal(t, 0.2, r.Details("b", Query{}, t0)[0].Rate)
}

// BenchmarkRound measures one sampling round over 10,000 objects, the
// cost the sampler adds every interval; heap per object is reported.
func BenchmarkRound(b *testing.B) {
	r := New(Config{})
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "queue" + string(rune('a'+i%26)) + time.Duration(i).String()
	}
	vals := make([]uint64, 15)
	at := t0
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(5 * time.Second)
		r.StartRound(at)
		for _, k := range keys {
			vals[0]++
			r.Record(k, false, 12, vals)
		}
		r.EndRound()
	}
}
