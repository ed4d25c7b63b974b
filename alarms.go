package broker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/internal/dedup"
	"github.com/warrenmq/broker/internal/memuse"
	"github.com/warrenmq/broker/internal/rates"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/storage"
	pebblestore "github.com/warrenmq/broker/storage/pebble"
)

// Flow control: RabbitMQ's memory and disk alarms.
//
// While an alarm is raised, every connection that publishes is blocked: on
// reading a basic.publish its reader sends connection.blocked (to clients
// that announced the capability, as amqp091-go does) and stops reading the
// socket until every alarm cleared, then sends connection.unblocked and goes
// on. Connections that only consume are never blocked, so consumers drain
// the queues; a publish on a Channel (the direct API) waits instead. See
// session.Alarms for the connection side.
//
// One monitor goroutine, started by New and stopped by Close, owns the
// monitored alarms: every memoryPoll it adds up the message bytes held in
// memory and compares them with Options.MemoryHighWatermark; every diskPoll
// (every diskPollNear when free space is within twice the threshold of
// running out, as RabbitMQ 4.x polls up to ten times a second near its
// limit) it reads the free space of Options.DataDir's file system and
// compares it with Options.DiskFreeLimit plus the headroom Pebble may claim
// at once (a WAL and a memtable flush, DiskReserve.Headroom).
// New takes the first samples itself, so a broker started on a full disk
// serves no publish before its alarm is up. An alarm clears as soon as its
// measure is back under the limit (RabbitMQ has no hysteresis either).
// RaiseAlarm and ClearAlarm set a manual alarm of each kind, OR-ed with the
// monitored one.
//
// A full disk is an alarm, never a crash: Pebble cannot survive a refused
// WAL or MANIFEST write, so the data directory holds a reserve file
// (storage/pebble.DiskReserve) that is deleted the moment a write fails
// with ENOSPC. That write is retried in the space it frees, the disk alarm
// is raised at once (diskFull), and consumers drain on the reserve's space.
// Free space is measured without the missing reserve, so deleting it does
// not clear the alarm; once the alarm clears, the monitor recreates it.
// The reserve is sized by what Pebble's memtables hold (small for a small
// broker); before each sample the monitor lets it grow with them
// (DiskReserve.Resize), and growth not yet allocated counts as missing.

// Alarm is a kind of resource alarm. The kinds are bits, so RaiseAlarm and
// ClearAlarm accept several OR-ed together (AlarmMemory|AlarmDisk).
type Alarm uint8

// The alarm kinds RabbitMQ has. Their values are the root's own: the
// connections' gate (session.Alarms) numbers its bits separately, and
// sessionAlarms / alarmsOfSession are the only places that translate.
const (
	// AlarmMemory: message bytes held in memory are above
	// Options.MemoryHighWatermark.
	AlarmMemory Alarm = 1 << iota
	// AlarmDisk: free space on DataDir's file system is below
	// Options.DiskFreeLimit.
	AlarmDisk

	allAlarms = AlarmMemory | AlarmDisk
)

// alarmBits pairs each Alarm with the session.Alarms bit that blocks
// connections for it.
var alarmBits = [...]struct {
	kind Alarm
	bit  uint32
}{
	{AlarmMemory, session.AlarmMemory},
	{AlarmDisk, session.AlarmDisk},
}

// sessionAlarms returns the session.Alarms bit set that raises the alarms
// in a; unknown bits are dropped.
func sessionAlarms(a Alarm) uint32 {
	var bits uint32
	for _, m := range alarmBits {
		if a&m.kind != 0 {
			bits |= m.bit
		}
	}
	return bits
}

// alarmsOfSession is sessionAlarms's inverse: the Alarms raised in a
// session.Alarms bit set.
func alarmsOfSession(bits uint32) Alarm {
	var a Alarm
	for _, m := range alarmBits {
		if bits&m.bit != 0 {
			a |= m.kind
		}
	}
	return a
}

// String returns "memory" or "disk", the names RabbitMQ gives its resource
// alarms.
func (a Alarm) String() string {
	switch a {
	case AlarmMemory:
		return "memory"
	case AlarmDisk:
		return "disk"
	}
	return fmt.Sprintf("Alarm(%d)", uint8(a))
}

// memoryWatermark is the memory alarm's limit for Options.MemoryHighWatermark
// w: w itself, or DefaultMemoryHighWatermarkRatio of the machine's memory
// when w is 0 (and when it is negative, for the limits derived from it:
// the alarm is off, the caches' bound is not).
func memoryWatermark(w int64) int64 {
	if w > 0 {
		return w
	}
	return int64(DefaultMemoryHighWatermarkRatio * float64(totalMemory()))
}

// heldMemory is what the broker keeps in the heap besides its queues'
// messages, each part counted by its holder and added to the memory
// alarm's measure (docs: Flow control): the deduplication caches of
// exchanges in memory (bounded by their Budget: half the watermark) and
// the keys of deduplicating queues; delayed messages held in memory and
// those on their way to the delayed store; direct reply-to replies
// waiting for their requester; the rate history; and what a
// ReplyForwarder given in Options reports (a cluster's queues of replies
// for other members).
type heldMemory struct {
	dedup     *dedup.Budget
	dedupKeys memuse.Counter
	delayed   memuse.Counter
	replies   memuse.Counter
	rates     atomic.Pointer[rates.Recorder] // set once the history starts
	forwarder storage.MemoryReporter         // Options.Replies, when it reports
}

// heldPart is one holder's bytes, under the name the alarm's log gives it.
type heldPart struct {
	name string
	n    int64
}

func (h *heldMemory) parts() []heldPart {
	out := []heldPart{
		{"dedup_caches", h.dedup.MemoryBytes()},
		{"dedup_queue_keys", h.dedupKeys.MemoryBytes()},
		{"delayed", h.delayed.MemoryBytes()},
		{"replies", h.replies.MemoryBytes()},
	}
	if r := h.rates.Load(); r != nil {
		out = append(out, heldPart{"rates", r.MemoryBytes()})
	}
	if h.forwarder != nil {
		out = append(out, heldPart{"forwarded_replies", h.forwarder.MemoryBytes()})
	}
	return out
}

func (h *heldMemory) total() int64 {
	var n int64
	for _, p := range h.parts() {
		n += p.n
	}
	return n
}

// attrs are the parts as log attributes, in bytes.
func (h *heldMemory) attrs() []any {
	var out []any
	for _, p := range h.parts() {
		out = append(out, p.name, p.n)
	}
	return out
}

// assumedTotalMemory is what the default watermark is a share of when the
// machine's memory cannot be read (not Linux): RabbitMQ assumes 1 GiB too.
const assumedTotalMemory = 1 << 30

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

// alarmState is the broker's alarms: the gate every connection obeys, and
// what the monitor measured.
type alarmState struct {
	gate session.Alarms

	// memLimit and diskLimit are the limits in force, <= 0: not
	// checked. setupAlarms sets them and SetAlarmLimits changes them
	// while the monitor runs, which reads them at each sample.
	memLimit, diskLimit atomic.Int64
	// memWatched and diskWatched say whether the monitor samples memory
	// and disk: fixed by setupAlarms, so a limit off at start stays off.
	memWatched, diskWatched bool
	dir                     string
	// reserve is the DB's disk reserve; nil without DataDir (or with all
	// three stores given in Options). diskHeadroom is its Headroom.
	reserve      *pebblestore.DiskReserve
	diskHeadroom int64
	// debt is the bytes Pebble's pending compactions will rewrite (nil
	// without a DB): a compaction writes its output before it deletes its
	// input, so that much space must stay free too.
	debt func() int64
	// reclaim makes Pebble give back the space of deleted data
	// (stores.reclaim); the monitor calls it every reclaimEvery while the
	// disk alarm is up, so a drained queue clears the alarm. lastReclaim
	// is the monitor's own.
	reclaim     func(context.Context) error
	lastReclaim time.Time
	sources     []storage.MemoryReporter
	held        *heldMemory
	poll        alarmPolling

	memUsed, diskFree atomic.Int64 // last samples, for the management API and metrics

	mu struct {
		sync.Mutex
		manual, monitored Alarm
	}
	// disk serializes checkDisk and diskFull, so that a sample taken
	// before a write failed cannot clear the alarm diskFull raised.
	disk struct {
		sync.Mutex
		// full is set when a write failed with ENOSPC and cleared when
		// the monitor sees room again: it raises the disk alarm even when
		// DiskFreeLimit turned the free-space check off.
		full bool
		// The last sample and when it was taken, and the wait before the
		// next (nextDiskPollLocked).
		lastFree int64
		lastAt   time.Time
		next     time.Duration
	}
	stop chan struct{} // closed by stopAlarms
	done chan struct{} // closed when the monitor exited; nil when none runs
}

// setupAlarms resolves the limits and picks the memory sources; it runs in
// New before any connection can be served (b.cfg.Alarms points at the gate).
func (b *Broker) setupAlarms() {
	a := &b.alarm
	a.poll = b.opts.alarmPolling
	if a.poll.memory <= 0 {
		a.poll.memory = defaultMemoryPoll
	}
	if a.poll.disk <= 0 {
		a.poll.disk = defaultDiskPoll
	}
	if a.poll.statfs == nil {
		a.poll.statfs = statfsFree
	}
	mem, disk := b.alarmLimits(b.opts.MemoryHighWatermark, b.opts.DiskFreeLimit)
	a.memLimit.Store(mem)
	a.diskLimit.Store(disk)
	a.memWatched = mem > 0
	if b.opts.DataDir != "" {
		a.dir = b.opts.DataDir
		if r := b.stores.reserve; r != nil {
			a.reserve = r
			a.diskHeadroom = r.Headroom()
			db := b.stores.db
			a.debt = func() int64 { return int64(db.Metrics().Compact.EstimatedDebt) }
			a.reclaim = b.stores.reclaim
		}
	}
	seen := map[storage.ShardStore]bool{}
	for _, st := range []storage.ShardStore{b.stores.transient.Shards, b.stores.durable.Shards} {
		if seen[st] {
			continue
		}
		seen[st] = true
		// The in-memory stores (*memory.Store) and any Options.Shards
		// store that reports its memory.
		if s, ok := st.(storage.MemoryReporter); ok {
			a.sources = append(a.sources, s)
		}
	}
	a.held = &b.held
	a.diskWatched = disk > 0 || a.reserve != nil
	a.stop = make(chan struct{})
}

// alarmLimits resolves Options.MemoryHighWatermark and DiskFreeLimit (0:
// the default, negative: off; no disk limit without a DataDir) into the
// limits the monitor compares with, -1 for off.
func (b *Broker) alarmLimits(memory, diskFree int64) (mem, disk int64) {
	mem, disk = -1, -1
	if memory >= 0 {
		mem = memoryWatermark(memory)
	}
	if b.opts.DataDir != "" {
		switch {
		case diskFree > 0:
			disk = diskFree
		case diskFree == 0:
			disk = DefaultDiskFreeLimit
		}
	}
	return mem, disk
}

// SetAlarmLimits changes the memory high watermark and the free disk
// limit of a running broker, with the meanings of
// Options.MemoryHighWatermark and Options.DiskFreeLimit (0: the default,
// negative: off). The monitor compares with them from its next sample
// on, raising or clearing the alarms as the new limits say; the budgets
// derived from the watermark at New (the deduplication caches') stay as
// they were. A check that was off when the broker was created (a
// negative limit, or no DataDir for the disk) cannot be turned on: that
// needs a new broker, and SetAlarmLimits then changes nothing and says
// so.
func (b *Broker) SetAlarmLimits(memory, diskFree int64) error {
	a := &b.alarm
	mem, disk := b.alarmLimits(memory, diskFree)
	if mem > 0 && !a.memWatched {
		return errors.New("broker: the memory alarm was off at start (MemoryHighWatermark < 0): turning it on needs a restart")
	}
	if disk > 0 && !a.diskWatched {
		return errors.New("broker: the disk alarm was off at start (DiskFreeLimit < 0 or no DataDir): turning it on needs a restart")
	}
	a.memLimit.Store(mem)
	a.diskLimit.Store(disk)
	return nil
}

// watchDisk reports whether the monitor samples the disk: for the
// free-space alarm, or to clear a disk-full alarm and restore the reserve.
func (a *alarmState) watchDisk() bool { return a.diskWatched }

// startAlarms takes the first samples, so that no publish is served before
// an alarm that is due is up, and starts the monitor goroutine when
// anything is monitored.
func (b *Broker) startAlarms() {
	a := &b.alarm
	if !a.memWatched && !a.watchDisk() {
		return
	}
	if a.memWatched {
		b.checkMemory()
	}
	if a.watchDisk() {
		b.checkDisk()
	}
	a.done = make(chan struct{})
	go b.monitorAlarms()
}

// stopAlarms stops the monitor and waits for it. Close calls it once.
func (b *Broker) stopAlarms() {
	close(b.alarm.stop)
	if b.alarm.done != nil {
		<-b.alarm.done
	}
}

// monitorAlarms samples memory and disk until stopAlarms; startAlarms took
// the first samples.
func (b *Broker) monitorAlarms() {
	a := &b.alarm
	defer close(a.done)
	var memTick <-chan time.Time
	if a.memWatched {
		t := time.NewTicker(a.poll.memory)
		defer t.Stop()
		memTick = t.C
	}
	var diskTimer *time.Timer
	var diskTick <-chan time.Time
	if a.watchDisk() {
		diskTimer = time.NewTimer(a.diskInterval())
		defer diskTimer.Stop()
		diskTick = diskTimer.C
	}
	for {
		select {
		case <-memTick:
			b.checkMemory()
		case <-diskTick:
			b.checkDisk()
			b.reclaimDisk()
			diskTimer.Reset(a.diskInterval())
		case <-a.stop:
			return
		}
	}
}

// diskInterval is the wait before the next disk sample, as checkDisk set
// it.
func (a *alarmState) diskInterval() time.Duration {
	a.disk.Lock()
	defer a.disk.Unlock()
	if a.disk.next <= 0 {
		return a.poll.disk
	}
	return a.disk.next
}

// nextDiskPollLocked sets the wait before the next disk sample from the
// space left before the alarm: a quarter of the time that space lasts at
// the rate it shrank at since the last sample, or at fastDisk (at least
// minDiskPoll); diskPollNear once less than one threshold is left; the
// configured poll when that is shorter still. RabbitMQ 4.x polls up to ten times a second
// near its limit; a publisher writing 100 MB/s would eat a fixed poll's
// worth of space first. a.disk is held.
func (a *alarmState) nextDiskPollLocked(free, left, diskLimit int64) {
	now := time.Now()
	next := a.poll.disk
	if left < max(diskLimit, 0)+a.diskHeadroom {
		next = min(next, diskPollNear)
	}
	if left > 0 {
		// However fast the disk was so far, it may take the next burst
		// at fastDisk.
		next = min(next, max(time.Duration(float64(left)/fastDisk*float64(time.Second))/4, minDiskPoll))
	}
	if !a.disk.lastAt.IsZero() && free < a.disk.lastFree && left > 0 {
		dt := now.Sub(a.disk.lastAt)
		rate := float64(a.disk.lastFree-free) / dt.Seconds() // bytes per second
		lasts := time.Duration(float64(left) / rate * float64(time.Second))
		next = min(next, max(lasts/4, minDiskPoll))
	}
	a.disk.lastFree, a.disk.lastAt, a.disk.next = free, now, next
}

// reserveMissing is the disk reserve's Missing, 0 without a reserve.
func (a *alarmState) reserveMissing() int64 {
	if a.reserve == nil {
		return 0
	}
	return a.reserve.Missing()
}

// memoryUsed adds up the message bytes of every memory source, those
// the connections hold before a queue has them (session.Alarms.Buffered:
// bodies still arriving, uncommitted transactions), and what the caches
// and holding stores keep (heldMemory).
func (a *alarmState) memoryUsed() int64 {
	n := a.gate.Buffered()
	for _, s := range a.sources {
		n += s.MemoryBytes()
	}
	if a.held != nil {
		n += a.held.total()
	}
	return n
}

func (b *Broker) checkMemory() {
	a := &b.alarm
	used := a.memoryUsed()
	a.memUsed.Store(used)
	limit := a.memLimit.Load()
	b.setMonitored(AlarmMemory, limit > 0 && used > limit)
}

// checkDisk samples free space and sets the disk alarm: raised while the
// space left, not counting what the missing reserve will take back, is
// below DiskFreeLimit plus the headroom and Pebble's compaction debt. A
// missing reserve is restored once it fits with the headroom besides.
func (b *Broker) checkDisk() {
	a := &b.alarm
	// The debt first, without a.disk: Metrics takes Pebble's mutex, and a
	// Pebble write refused for want of space waits in diskFull for a.disk.
	var debt int64
	if a.debt != nil {
		debt = a.debt()
	}
	if a.reserve != nil {
		// Also without a.disk: it reads Pebble's metrics too. A reserve
		// that grew with the memtables counts as missing until it fits.
		a.reserve.Resize()
	}
	a.disk.Lock()
	defer a.disk.Unlock()
	free, err := a.poll.statfs(a.dir)
	if err != nil {
		// Keep the last verdict; say so once per failing streak.
		if a.diskFree.Swap(-1) != -1 {
			b.log.Warn("broker: cannot read free disk space, disk alarm unchanged", "dir", a.dir, "err", err)
		}
		return
	}
	a.diskFree.Store(free)
	missing := a.reserveMissing()
	left := free - missing - a.diskHeadroom - debt
	limit := a.diskLimit.Load()
	a.nextDiskPollLocked(free, left-max(limit, 0), limit)
	on := (limit > 0 && left < limit) || (a.disk.full && left < max(limit, 0))
	a.disk.full = a.disk.full && on
	b.setMonitored(AlarmDisk, on)
	// The reserve comes back as soon as it fits with room for a WAL
	// rotation and a flush besides, alarm or not: what Pebble cannot
	// survive is a refused WAL write, and it protects exactly those.
	if missing > 0 && free >= missing+a.diskHeadroom {
		if err := a.reserve.Restore(); err != nil {
			b.log.Warn("broker: cannot restore the disk reserve", "dir", a.dir, "err", err)
			return
		}
		if missing == a.reserve.Target() {
			b.log.Info("broker: disk reserve restored", "dir", a.dir, "bytes", missing)
		} else {
			b.log.Debug("broker: disk reserve grown with Pebble's memtables", "dir", a.dir, "bytes", missing)
		}
	}
}

// reclaimDisk asks the store to give back the space of deleted messages,
// every reclaimEvery while the disk alarm is up (and not by hand). The
// monitor calls it without a.disk held: it writes to the DB, and a write
// refused for want of space calls diskFull.
func (b *Broker) reclaimDisk() {
	a := &b.alarm
	if a.reclaim == nil || a.gate.Active()&uint32(AlarmDisk) == 0 || time.Since(a.lastReclaim) < reclaimEvery {
		return
	}
	a.mu.Lock()
	monitored := a.mu.monitored&AlarmDisk != 0
	a.mu.Unlock()
	if !monitored {
		return
	}
	// A flush rotates the WAL, and a WAL write refused with no reserve
	// left is fatal to Pebble: only with the reserve in place, or room
	// for a rotation and a flush.
	if free := a.diskFree.Load(); a.reserveMissing() > 0 && free < a.diskHeadroom {
		return
	}
	a.lastReclaim = time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := a.reclaim(ctx); err != nil && ctx.Err() == nil {
		b.log.Debug("broker: reclaiming disk space failed, will retry", "err", err.Error())
	}
}

// diskFull is the disk reserve's OnFull: a write failed with ENOSPC. The
// disk alarm goes up at once, before any monitor sample, and stays until
// checkDisk sees room again. Pebble's writes may wait while it runs: it
// only logs and sets the alarm.
func (b *Broker) diskFull(released int64, critical bool) {
	a := &b.alarm
	a.disk.Lock()
	defer a.disk.Unlock()
	switch {
	case released > 0:
		b.log.Warn("broker: disk full: released the disk reserve, publishers are blocked until space is freed",
			"dir", b.opts.DataDir, "reserve", released)
	case critical:
		b.log.Error("broker: disk full and the disk reserve is used up: the store may fail; free disk space",
			"dir", b.opts.DataDir)
	case !a.disk.full:
		b.log.Warn("broker: disk full: publishers are blocked until space is freed", "dir", b.opts.DataDir)
	}
	a.disk.full = true
	b.setMonitored(AlarmDisk, true)
}

// setMonitored records the monitor's verdict on kind.
func (b *Broker) setMonitored(kind Alarm, on bool) {
	a := &b.alarm
	a.mu.Lock()
	before := a.mu.monitored
	if on {
		a.mu.monitored |= kind
	} else {
		a.mu.monitored &^= kind
	}
	if a.mu.monitored == before {
		a.mu.Unlock()
		return
	}
	b.applyAlarmsLocked("monitor")
}

// RaiseAlarm raises the alarm of kind by hand, as if its resource had run
// low: publishing connections are blocked until ClearAlarm (and until the
// monitored alarm of that kind, if any, clears too). Unknown kinds are
// ignored. Tests use it to exercise flow control without filling memory.
func (b *Broker) RaiseAlarm(kind Alarm) {
	a := &b.alarm
	a.mu.Lock()
	a.mu.manual |= kind & allAlarms
	b.applyAlarmsLocked("manual")
}

// ClearAlarm clears the alarm of kind that RaiseAlarm raised. An alarm the
// monitor raised stays until its resource is back under the limit.
func (b *Broker) ClearAlarm(kind Alarm) {
	a := &b.alarm
	a.mu.Lock()
	a.mu.manual &^= kind
	b.applyAlarmsLocked("manual")
}

// Alarms returns the alarms in effect (raised by hand or by the monitor),
// memory before disk; none is an empty slice.
func (b *Broker) Alarms() []Alarm {
	active := alarmsOfSession(b.alarm.gate.Active())
	out := []Alarm{}
	for _, k := range []Alarm{AlarmMemory, AlarmDisk} {
		if active&k != 0 {
			out = append(out, k)
		}
	}
	return out
}

// applyAlarmsLocked hands manual|monitored to the connections and logs each
// alarm that was raised or cleared. It releases a.mu: the log is written
// outside it.
func (b *Broker) applyAlarmsLocked(by string) {
	a := &b.alarm
	active := a.mu.manual | a.mu.monitored
	before := alarmsOfSession(a.gate.Active())
	a.gate.Set(sessionAlarms(active))
	a.mu.Unlock()
	for _, k := range []Alarm{AlarmMemory, AlarmDisk} {
		was, is := before&k != 0, active&k != 0
		if was == is {
			continue
		}
		attrs := []any{"alarm", k.String(), "by", by}
		if k == AlarmMemory {
			attrs = append(attrs, "mem_used", a.memUsed.Load(), "mem_limit", a.memLimit.Load())
			if is && a.held != nil {
				// Which of the holders besides the queues holds the memory.
				attrs = append(attrs, a.held.attrs()...)
			}
		} else {
			attrs = append(attrs, "disk_free", a.diskFree.Load(), "disk_free_limit", a.diskLimit.Load())
		}
		if is {
			b.log.Warn("broker: resource alarm raised, publishers are blocked", attrs...)
		} else {
			b.log.Info("broker: resource alarm cleared", attrs...)
		}
	}
}

// alarmStatus is what the management API and metrics show of the alarms
// (RabbitMQ's mem_alarm, disk_free_alarm, mem_used, mem_limit, disk_free,
// disk_free_limit). A limit of 0 means not monitored; diskFree is -1 when
// unknown.
type alarmStatus struct {
	MemAlarm, DiskFreeAlarm bool
	MemUsed, MemLimit       int64
	DiskFree, DiskFreeLimit int64
}

func (b *Broker) alarmStatus() alarmStatus {
	a := &b.alarm
	active := alarmsOfSession(a.gate.Active())
	s := alarmStatus{
		MemAlarm:      active&AlarmMemory != 0,
		DiskFreeAlarm: active&AlarmDisk != 0,
		MemUsed:       a.memoryUsed(),
		MemLimit:      max(a.memLimit.Load(), 0),
		DiskFree:      -1,
		DiskFreeLimit: max(a.diskLimit.Load(), 0),
	}
	if s.DiskFreeLimit > 0 {
		if free := a.diskFree.Load(); free > 0 {
			s.DiskFree = free
		}
	}
	return s
}

// totalMemory is the memory the process may use: the machine's (Linux
// /proc/meminfo), or the cgroup's limit when lower, as RabbitMQ's
// vm_memory_monitor reads it; assumedTotalMemory when neither is readable.
func totalMemory() int64 {
	total := int64(0)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		total = parseMemTotal(b)
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) mean no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	if total <= 0 {
		return assumedTotalMemory
	}
	return total
}

// parseMemTotal reads "MemTotal: N kB" from /proc/meminfo; 0 if absent.
func parseMemTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || n <= 0 {
				return 0
			}
			if len(f) >= 3 && f[2] == "kB" {
				n *= 1024
			}
			return n
		}
	}
	return 0
}
