package rates

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/internal/shrink"
)

// Config sizes a Recorder. Zero fields take the defaults: RabbitMQ's
// 5 s sample interval, 10 minutes of history, 64 watched objects kept
// for 10 minutes after the last request.
type Config struct {
	// Interval is how often the sampler records; Details assumes it when
	// it thins samples.
	Interval time.Duration
	// Keep is how many samples a full history holds.
	Keep int
	// Watch bounds the objects, beyond the pinned ones, that keep a full
	// history; WatchFor is how long one is kept after it was last asked.
	Watch    int
	WatchFor time.Duration
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 5 * time.Second
	}
	if c.Keep <= 0 {
		c.Keep = 120
	}
	if c.Watch <= 0 {
		c.Watch = 64
	}
	if c.WatchFor <= 0 {
		c.WatchFor = 10 * time.Minute
	}
	return c
}

// Recorder holds the samples. The zero value is not usable: use New.
type Recorder struct {
	cfg Config

	mu      sync.Mutex
	round   uint64
	at      time.Time // of the round being recorded
	objects map[string]*object
	watched map[string]*object // objects with a full history that are not pinned
	// objectsPeak rebuilds objects once it holds a quarter of its largest
	// size (shrink.Map): deleted queues and closed connections would
	// otherwise leave the table of the most the broker ever had.
	objectsPeak shrink.Peak
	// bytes is what the objects hold in the heap, by the estimate
	// EndRound takes (objectBytes each).
	bytes atomic.Int64
}

// object is one sampled thing: a queue, a connection, the broker.
type object struct {
	counters      int    // the first counters values only grow; the rest are gauges
	round         uint64 // the last round that recorded it
	newest, older point  // the two newest samples; older.at is zero until there are two
	hist          *ring  // nil unless pinned or watched
	pinned        bool
	watchedUntil  time.Time
}

type point struct {
	at   time.Time
	vals []uint64
}

// New returns an empty Recorder.
func New(cfg Config) *Recorder {
	return &Recorder{cfg: cfg.withDefaults(), objects: make(map[string]*object), watched: make(map[string]*object)}
}

// Interval is the configured sample interval.
func (r *Recorder) Interval() time.Duration { return r.cfg.Interval }

// StartRound begins a round of Record calls taken at at.
func (r *Recorder) StartRound(at time.Time) {
	r.mu.Lock()
	r.round++
	r.at = at
	r.mu.Unlock()
}

// Record stores vals as the object key's sample of this round. The first
// counters values are counters: when one went down the object was
// replaced (a queue deleted and declared again between two rounds) and its
// history starts over. A pinned object always keeps a full history. vals
// is copied.
func (r *Recorder) Record(key string, pinned bool, counters int, vals []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.objects[key]
	if o == nil || len(o.newest.vals) != len(vals) {
		o = &object{counters: counters, pinned: pinned}
		if pinned {
			o.hist = newRing(r.cfg.Keep, len(vals))
		}
		r.objects[key] = o
	} else if o.restarted(vals) {
		o.older = point{}
		o.newest.at = time.Time{}
		if o.hist != nil {
			o.hist.reset()
		}
	}
	o.round = r.round
	if !o.newest.at.IsZero() {
		o.older.at = o.newest.at
		o.older.vals = append(o.older.vals[:0], o.newest.vals...)
	}
	o.newest.at = r.at
	o.newest.vals = append(o.newest.vals[:0], vals...)
	if o.hist != nil {
		o.hist.push(r.at, vals)
	}
}

// restarted reports whether a counter went down since the newest sample.
func (o *object) restarted(vals []uint64) bool {
	if o.newest.at.IsZero() {
		return false
	}
	for i := range min(o.counters, len(vals)) {
		if vals[i] < o.newest.vals[i] {
			return true
		}
	}
	return false
}

// EndRound forgets the objects the round did not record (they are gone)
// and the full histories nobody asked for within WatchFor.
func (r *Recorder) EndRound() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objectsPeak.Saw(len(r.objects))
	for k, o := range r.objects {
		if o.round != r.round {
			delete(r.objects, k)
			delete(r.watched, k)
		}
	}
	r.objects = shrink.Map(r.objects, &r.objectsPeak)
	var n int64
	for k, o := range r.objects {
		n += o.heapBytes(k)
	}
	r.bytes.Store(n)
	for k, o := range r.watched {
		if r.at.After(o.watchedUntil) {
			o.hist = nil
			delete(r.watched, k)
		}
	}
}

// objectOverhead is what an object costs in the heap besides its key and
// values: the object struct and its slot in the map.
// TestRecorderMemoryBytes checks it against the live heap.
const objectOverhead = 200

// heapBytes estimates what o, recorded under key, holds: its key, its two
// newest samples and its history when it keeps one.
func (o *object) heapBytes(key string) int64 {
	n := int64(objectOverhead+len(key)) + 8*int64(cap(o.newest.vals)+cap(o.older.vals))
	if o.hist != nil {
		n += int64(24*len(o.hist.at) + 8*len(o.hist.vals))
	}
	return n
}

// MemoryBytes returns what the recorded objects hold in the heap, as the
// last EndRound estimated it: about objectOverhead plus their key and
// values each, plus the full histories (storage.MemoryReporter, so the
// history counts against the memory alarm).
func (r *Recorder) MemoryBytes() int64 { return r.bytes.Load() }

// Len is the number of objects held; Watched those of them with a full
// history that are not pinned.
func (r *Recorder) Len() (objects, watched int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.objects), len(r.watched)
}

// watch gives o a full history from now on, evicting the watched object
// asked for longest ago when Watch are kept already. Called with mu held.
func (r *Recorder) watch(key string, o *object, now time.Time) {
	o.watchedUntil = now.Add(r.cfg.WatchFor)
	if o.hist != nil {
		return
	}
	if len(r.watched) >= r.cfg.Watch {
		var oldestKey string
		var oldest *object
		for k, w := range r.watched {
			if oldest == nil || w.watchedUntil.Before(oldest.watchedUntil) {
				oldestKey, oldest = k, w
			}
		}
		oldest.hist = nil
		delete(r.watched, oldestKey)
	}
	o.hist = newRing(r.cfg.Keep, len(o.newest.vals))
	if !o.older.at.IsZero() {
		o.hist.push(o.older.at, o.older.vals)
	}
	o.hist.push(o.newest.at, o.newest.vals)
	r.watched[key] = o
}

// ring is a fixed-size history: the newest keep samples of fields values.
type ring struct {
	fields int
	at     []time.Time
	vals   []uint64 // keep × fields
	next   int      // where the next sample goes
	n      int      // samples held
}

func newRing(keep, fields int) *ring {
	return &ring{fields: fields, at: make([]time.Time, keep), vals: make([]uint64, keep*fields)}
}

func (g *ring) push(at time.Time, vals []uint64) {
	g.at[g.next] = at
	copy(g.vals[g.next*g.fields:(g.next+1)*g.fields], vals)
	g.next = (g.next + 1) % len(g.at)
	g.n = min(g.n+1, len(g.at))
}

func (g *ring) reset() { g.next, g.n = 0, 0 }

// newestFirst calls f for each sample held, newest first, until f
// returns false.
func (g *ring) newestFirst(f func(at time.Time, vals []uint64) bool) {
	for i := range g.n {
		j := (g.next - 1 - i + len(g.at)) % len(g.at)
		if !f(g.at[j], g.vals[j*g.fields:(j+1)*g.fields]) {
			return
		}
	}
}
