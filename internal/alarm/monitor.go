package alarm

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/storage"
	pebblestore "github.com/warrenmq/broker/storage/pebble"
)

// RabbitMQ checks memory every 500 ms and disk every 10 s at most; the
// message-byte count here costs one atomic load per store, so it is
// sampled more often to keep the overshoot small.
const (
	defaultMemoryPoll = 100 * time.Millisecond
	defaultDiskPoll   = time.Second
	diskPollNear      = 100 * time.Millisecond
	minDiskPoll       = 5 * time.Millisecond
	// fastDisk is the write rate, in bytes per second, the disk monitor
	// assumes a burst may reach (a fast SSD): it samples often enough to
	// see the space left before the alarm run out at that rate.
	fastDisk = 1 << 30
	// reclaimEvery spaces the reclaim passes during a disk alarm.
	reclaimEvery = time.Second
)

// Polling is how often the monitor samples; tests shorten it and fake the
// disk. Zero fields take the defaults.
type Polling struct {
	Memory, Disk time.Duration
	// Statfs returns the free bytes of the file system holding path.
	Statfs func(path string) (int64, error)
}

// Config is what a Monitor watches, fixed at Setup.
type Config struct {
	Poll Polling
	// MemLimit and DiskLimit are the limits in force at start, <= 0: not
	// checked (and, for MemLimit, never turned on by SetLimits).
	MemLimit, DiskLimit int64
	// Reserve is the DB's disk reserve; nil without a DB in Dir.
	Reserve *pebblestore.DiskReserve
	// Debt is the bytes Pebble's pending compactions will rewrite (nil
	// without a DB): a compaction writes its output before it deletes its
	// input, so that much space must stay free too.
	Debt func() int64
	// Reclaim makes Pebble give back the space of deleted data; the
	// monitor calls it every second while the disk alarm is up, so a
	// drained queue clears the alarm.
	Reclaim func(context.Context) error
	// Sources are the stores that report the message bytes they hold.
	Sources []storage.MemoryReporter
	Held    *Held
}

// Monitor is the broker's alarms: the gate every connection obeys, and
// what the monitor measured. Make it with NewMonitor.
type Monitor struct {
	gate session.Alarms
	cfg  Config
	log  *slog.Logger
	dir  string // the data directory whose file system is watched; "" without one

	// memLimit and diskLimit are the limits in force, <= 0: not
	// checked. SetLimits changes them while the monitor runs, which
	// reads them at each sample.
	memLimit, diskLimit atomic.Int64
	// memWatched and diskWatched say whether the monitor samples memory
	// and disk: fixed by Setup, so a limit off at start stays off.
	memWatched, diskWatched bool
	diskHeadroom            int64
	lastReclaim             time.Time // the monitor goroutine's own

	memUsed, diskFree atomic.Int64 // last samples, for the management API and metrics

	mu struct {
		sync.Mutex
		manual, monitored Kind
	}
	// disk serializes checkDisk and DiskFull, so that a sample taken
	// before a write failed cannot clear the alarm DiskFull raised.
	disk struct {
		sync.Mutex
		// full is set when a write failed with ENOSPC and cleared when
		// the monitor sees room again: it raises the disk alarm even when
		// the free-space check is off.
		full bool
		// The last sample and when it was taken, and the wait before the
		// next (nextDiskPollLocked).
		lastFree int64
		lastAt   time.Time
		next     time.Duration
	}
	stop chan struct{} // closed by Stop
	done chan struct{} // closed when the monitor exited; nil when none runs
}

// NewMonitor returns a monitor that logs to log and watches the file
// system of dir ("": none). Until Setup it watches nothing, but DiskFull
// (which the store may call while it opens) already raises the alarm.
func NewMonitor(log *slog.Logger, dir string) *Monitor {
	return &Monitor{log: log, dir: dir, stop: make(chan struct{})}
}

// Setup fixes what m watches; it runs before any connection can be served
// (they hold Gate).
func (m *Monitor) Setup(c Config) {
	if c.Poll.Memory <= 0 {
		c.Poll.Memory = defaultMemoryPoll
	}
	if c.Poll.Disk <= 0 {
		c.Poll.Disk = defaultDiskPoll
	}
	if c.Poll.Statfs == nil {
		c.Poll.Statfs = statfsFree
	}
	m.cfg = c
	m.memLimit.Store(c.MemLimit)
	m.diskLimit.Store(c.DiskLimit)
	m.memWatched = c.MemLimit > 0
	if c.Reserve != nil {
		m.diskHeadroom = c.Reserve.Headroom()
	}
	m.diskWatched = c.DiskLimit > 0 || c.Reserve != nil
}

// Gate is what connections obey: publishers block while an alarm is up.
func (m *Monitor) Gate() *session.Alarms { return &m.gate }

// DiskHeadroom is the disk reserve's Headroom, counted against free space.
func (m *Monitor) DiskHeadroom() int64 { return m.diskHeadroom }

// Running reports whether the monitor goroutine was started.
func (m *Monitor) Running() bool { return m.done != nil }

// SetLimits changes the limits in force (<= 0: off) from the next sample
// on. A check that was off at Setup cannot be turned on: SetLimits then
// changes nothing and says so.
func (m *Monitor) SetLimits(mem, disk int64) error {
	if mem > 0 && !m.memWatched {
		return errors.New("broker: the memory alarm was off at start (MemoryHighWatermark < 0): turning it on needs a restart")
	}
	if disk > 0 && !m.diskWatched {
		return errors.New("broker: the disk alarm was off at start (DiskFreeLimit < 0 or no DataDir): turning it on needs a restart")
	}
	m.memLimit.Store(mem)
	m.diskLimit.Store(disk)
	return nil
}

// Start takes the first samples, so that no publish is served before an
// alarm that is due is up, and starts the monitor goroutine when anything
// is monitored.
func (m *Monitor) Start() {
	if !m.memWatched && !m.diskWatched {
		return
	}
	if m.memWatched {
		m.checkMemory()
	}
	if m.diskWatched {
		m.checkDisk()
	}
	m.done = make(chan struct{})
	go m.run()
}

// Stop stops the monitor and waits for it. Call it once.
func (m *Monitor) Stop() {
	close(m.stop)
	if m.done != nil {
		<-m.done
	}
}

// run samples memory and disk until Stop; Start took the first samples.
func (m *Monitor) run() {
	defer close(m.done)
	var memTick <-chan time.Time
	if m.memWatched {
		t := time.NewTicker(m.cfg.Poll.Memory)
		defer t.Stop()
		memTick = t.C
	}
	var diskTimer *time.Timer
	var diskTick <-chan time.Time
	if m.diskWatched {
		diskTimer = time.NewTimer(m.diskInterval())
		defer diskTimer.Stop()
		diskTick = diskTimer.C
	}
	for {
		select {
		case <-memTick:
			m.checkMemory()
		case <-diskTick:
			m.checkDisk()
			m.reclaimDisk()
			diskTimer.Reset(m.diskInterval())
		case <-m.stop:
			return
		}
	}
}

// diskInterval is the wait before the next disk sample, as checkDisk set
// it.
func (m *Monitor) diskInterval() time.Duration {
	m.disk.Lock()
	defer m.disk.Unlock()
	if m.disk.next <= 0 {
		return m.cfg.Poll.Disk
	}
	return m.disk.next
}

// nextDiskPollLocked sets the wait before the next disk sample from the
// space left before the alarm: a quarter of the time that space lasts at
// the rate it shrank at since the last sample, or at fastDisk (at least
// minDiskPoll); diskPollNear once less than one threshold is left; the
// configured poll when that is shorter still. RabbitMQ 4.x polls up to ten
// times a second near its limit; a publisher writing 100 MB/s would eat a
// fixed poll's worth of space first. m.disk is held.
func (m *Monitor) nextDiskPollLocked(free, left, diskLimit int64) {
	now := time.Now()
	next := m.cfg.Poll.Disk
	if left < max(diskLimit, 0)+m.diskHeadroom {
		next = min(next, diskPollNear)
	}
	if left > 0 {
		// However fast the disk was so far, it may take the next burst
		// at fastDisk.
		next = min(next, max(time.Duration(float64(left)/fastDisk*float64(time.Second))/4, minDiskPoll))
	}
	if !m.disk.lastAt.IsZero() && free < m.disk.lastFree && left > 0 {
		dt := now.Sub(m.disk.lastAt)
		rate := float64(m.disk.lastFree-free) / dt.Seconds() // bytes per second
		lasts := time.Duration(float64(left) / rate * float64(time.Second))
		next = min(next, max(lasts/4, minDiskPoll))
	}
	m.disk.lastFree, m.disk.lastAt, m.disk.next = free, now, next
}

// reserveMissing is the disk reserve's Missing, 0 without a reserve.
func (m *Monitor) reserveMissing() int64 {
	if m.cfg.Reserve == nil {
		return 0
	}
	return m.cfg.Reserve.Missing()
}

// memoryUsed adds up the message bytes of every memory source, those
// the connections hold before a queue has them (session.Alarms.Buffered:
// bodies still arriving, uncommitted transactions), and what the caches
// and holding stores keep (Held).
func (m *Monitor) memoryUsed() int64 {
	n := m.gate.Buffered()
	for _, s := range m.cfg.Sources {
		n += s.MemoryBytes()
	}
	if m.cfg.Held != nil {
		n += m.cfg.Held.Total()
	}
	return n
}

func (m *Monitor) checkMemory() {
	used := m.memoryUsed()
	m.memUsed.Store(used)
	limit := m.memLimit.Load()
	m.setMonitored(Memory, limit > 0 && used > limit)
}

// checkDisk samples free space and sets the disk alarm: raised while the
// space left, not counting what the missing reserve will take back, is
// below the limit plus the headroom and Pebble's compaction debt. A
// missing reserve is restored once it fits with the headroom besides.
func (m *Monitor) checkDisk() {
	c := &m.cfg
	// The debt first, without m.disk: Metrics takes Pebble's mutex, and a
	// Pebble write refused for want of space waits in DiskFull for m.disk.
	var debt int64
	if c.Debt != nil {
		debt = c.Debt()
	}
	if c.Reserve != nil {
		// Also without m.disk: it reads Pebble's metrics too. A reserve
		// that grew with the memtables counts as missing until it fits.
		c.Reserve.Resize()
	}
	m.disk.Lock()
	defer m.disk.Unlock()
	free, err := c.Poll.Statfs(m.dir)
	if err != nil {
		// Keep the last verdict; say so once per failing streak.
		if m.diskFree.Swap(-1) != -1 {
			m.log.Warn("broker: cannot read free disk space, disk alarm unchanged", "dir", m.dir, "err", err)
		}
		return
	}
	m.diskFree.Store(free)
	missing := m.reserveMissing()
	left := free - missing - m.diskHeadroom - debt
	limit := m.diskLimit.Load()
	m.nextDiskPollLocked(free, left-max(limit, 0), limit)
	on := (limit > 0 && left < limit) || (m.disk.full && left < max(limit, 0))
	m.disk.full = m.disk.full && on
	m.setMonitored(Disk, on)
	// The reserve comes back as soon as it fits with room for a WAL
	// rotation and a flush besides, alarm or not: what Pebble cannot
	// survive is a refused WAL write, and it protects exactly those.
	if missing > 0 && free >= missing+m.diskHeadroom {
		if err := c.Reserve.Restore(); err != nil {
			m.log.Warn("broker: cannot restore the disk reserve", "dir", m.dir, "err", err)
			return
		}
		if missing == c.Reserve.Target() {
			m.log.Info("broker: disk reserve restored", "dir", m.dir, "bytes", missing)
		} else {
			m.log.Debug("broker: disk reserve grown with Pebble's memtables", "dir", m.dir, "bytes", missing)
		}
	}
}

// reclaimDisk asks the store to give back the space of deleted messages,
// every reclaimEvery while the disk alarm is up (and not by hand). The
// monitor calls it without m.disk held: it writes to the DB, and a write
// refused for want of space calls DiskFull.
func (m *Monitor) reclaimDisk() {
	if m.cfg.Reclaim == nil || ofGate(m.gate.Active())&Disk == 0 || time.Since(m.lastReclaim) < reclaimEvery {
		return
	}
	m.mu.Lock()
	monitored := m.mu.monitored&Disk != 0
	m.mu.Unlock()
	if !monitored {
		return
	}
	// A flush rotates the WAL, and a WAL write refused with no reserve
	// left is fatal to Pebble: only with the reserve in place, or room
	// for a rotation and a flush.
	if free := m.diskFree.Load(); m.reserveMissing() > 0 && free < m.diskHeadroom {
		return
	}
	m.lastReclaim = time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := m.cfg.Reclaim(ctx); err != nil && ctx.Err() == nil {
		m.log.Debug("broker: reclaiming disk space failed, will retry", "err", err.Error())
	}
}

// DiskFull is the disk reserve's OnFull: a write failed with ENOSPC. The
// disk alarm goes up at once, before any monitor sample, and stays until
// checkDisk sees room again. Pebble's writes may wait while it runs: it
// only logs and sets the alarm.
func (m *Monitor) DiskFull(released int64, critical bool) {
	m.disk.Lock()
	defer m.disk.Unlock()
	log, dir := m.log, m.dir
	switch {
	case released > 0:
		log.Warn("broker: disk full: released the disk reserve, publishers are blocked until space is freed",
			"dir", dir, "reserve", released)
	case critical:
		log.Error("broker: disk full and the disk reserve is used up: the store may fail; free disk space",
			"dir", dir)
	case !m.disk.full:
		log.Warn("broker: disk full: publishers are blocked until space is freed", "dir", dir)
	}
	m.disk.full = true
	m.setMonitored(Disk, true)
}

// setMonitored records the monitor's verdict on kind.
func (m *Monitor) setMonitored(kind Kind, on bool) {
	m.mu.Lock()
	before := m.mu.monitored
	if on {
		m.mu.monitored |= kind
	} else {
		m.mu.monitored &^= kind
	}
	if m.mu.monitored == before {
		m.mu.Unlock()
		return
	}
	m.applyLocked("monitor")
}

// Raise raises the alarms of kind by hand, as if their resource had run
// low: publishing connections are blocked until Clear (and until the
// monitored alarm of that kind, if any, clears too). Unknown kinds are
// ignored.
func (m *Monitor) Raise(kind Kind) {
	m.mu.Lock()
	m.mu.manual |= kind & All
	m.applyLocked("manual")
}

// Clear clears the alarms of kind that Raise raised. An alarm the monitor
// raised stays until its resource is back under the limit.
func (m *Monitor) Clear(kind Kind) {
	m.mu.Lock()
	m.mu.manual &^= kind
	m.applyLocked("manual")
}

// Active returns the alarms in effect, raised by hand or by the monitor.
func (m *Monitor) Active() Kind { return ofGate(m.gate.Active()) }

// applyLocked hands manual|monitored to the connections and logs each
// alarm that was raised or cleared. It releases m.mu: the log is written
// outside it.
func (m *Monitor) applyLocked(by string) {
	active := m.mu.manual | m.mu.monitored
	before := ofGate(m.gate.Active())
	m.gate.Set(gateBits(active))
	m.mu.Unlock()
	for _, k := range []Kind{Memory, Disk} {
		was, is := before&k != 0, active&k != 0
		if was == is {
			continue
		}
		attrs := []any{"alarm", k.String(), "by", by}
		if k == Memory {
			attrs = append(attrs, "mem_used", m.memUsed.Load(), "mem_limit", m.memLimit.Load())
			if is && m.cfg.Held != nil {
				// Which of the holders besides the queues holds the memory.
				attrs = append(attrs, m.cfg.Held.attrs()...)
			}
		} else {
			attrs = append(attrs, "disk_free", m.diskFree.Load(), "disk_free_limit", m.diskLimit.Load())
		}
		if is {
			m.log.Warn("broker: resource alarm raised, publishers are blocked", attrs...)
		} else {
			m.log.Info("broker: resource alarm cleared", attrs...)
		}
	}
}

// Status is what the management API and metrics show of the alarms
// (RabbitMQ's mem_alarm, disk_free_alarm, mem_used, mem_limit, disk_free,
// disk_free_limit). A limit of 0 means not monitored; DiskFree is -1 when
// unknown.
type Status struct {
	MemAlarm, DiskFreeAlarm bool
	MemUsed, MemLimit       int64
	DiskFree, DiskFreeLimit int64
}

// Status reads the alarms and the last samples.
func (m *Monitor) Status() Status {
	active := m.Active()
	s := Status{
		MemAlarm:      active&Memory != 0,
		DiskFreeAlarm: active&Disk != 0,
		MemUsed:       m.memoryUsed(),
		MemLimit:      max(m.memLimit.Load(), 0),
		DiskFree:      -1,
		DiskFreeLimit: max(m.diskLimit.Load(), 0),
	}
	if s.DiskFreeLimit > 0 {
		if free := m.diskFree.Load(); free > 0 {
			s.DiskFree = free
		}
	}
	return s
}
