package broker

import (
	"github.com/warrenmq/broker/internal/alarm"
	"github.com/warrenmq/broker/storage"
)

// Flow control: RabbitMQ's memory and disk alarms. internal/alarm owns
// the monitor and the gate connections obey (its doc says how memory and
// disk are measured and what a full disk does); this file wires it to the
// stores and keeps the public face.

// Alarm is a kind of resource alarm. The kinds are bits, so several may be
// OR-ed together (AlarmMemory|AlarmDisk).
type Alarm uint8

// The alarm kinds RabbitMQ has; their values are internal/alarm's Kind's.
const (
	// AlarmMemory: message bytes held in memory are above
	// Options.MemoryHighWatermark.
	AlarmMemory = Alarm(alarm.Memory)
	// AlarmDisk: free space on DataDir's file system is below
	// Options.DiskFreeLimit.
	AlarmDisk = Alarm(alarm.Disk)
)

// String returns "memory" or "disk", the names RabbitMQ gives its resource
// alarms.
func (a Alarm) String() string { return alarm.Kind(a).String() }

// memoryWatermark is the memory alarm's limit for Options.MemoryHighWatermark
// w: w itself, or DefaultMemoryHighWatermarkRatio of the machine's memory
// when w is 0 (and when it is negative, for the limits derived from it:
// the alarm is off, the caches' bound is not).
func memoryWatermark(w int64) int64 {
	if w > 0 {
		return w
	}
	return int64(DefaultMemoryHighWatermarkRatio * float64(alarm.TotalMemory()))
}

// setupAlarms resolves the limits and picks the memory sources; it runs in
// New before any connection can be served (b.cfg.Alarms points at the gate).
func (b *Broker) setupAlarms() {
	c := alarm.Config{Poll: b.opts.alarmPolling, Held: &b.held}
	c.MemLimit, c.DiskLimit = b.alarmLimits(b.opts.MemoryHighWatermark, b.opts.DiskFreeLimit)
	if r := b.stores.Reserve; r != nil && b.opts.DataDir != "" {
		c.Reserve = r
		db := b.stores.DB
		c.Debt = func() int64 { return int64(db.Metrics().Compact.EstimatedDebt) }
		c.Reclaim = b.stores.Reclaim
	}
	seen := map[storage.ShardStore]bool{}
	for _, st := range []storage.ShardStore{b.stores.Transient.Shards, b.stores.Durable.Shards} {
		if seen[st] {
			continue
		}
		seen[st] = true
		// The in-memory stores (*memory.Store) and any Options.Storage.Shards
		// store that reports its memory.
		if s, ok := st.(storage.MemoryReporter); ok {
			c.Sources = append(c.Sources, s)
		}
	}
	b.alarm.Setup(c)
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
	return b.alarm.SetLimits(b.alarmLimits(memory, diskFree))
}

// Alarms returns the alarms in effect (raised by hand or by the monitor),
// memory before disk; none is an empty slice.
func (b *Broker) Alarms() []Alarm {
	active := b.alarm.Active()
	out := []Alarm{}
	for _, k := range []alarm.Kind{alarm.Memory, alarm.Disk} {
		if active&k != 0 {
			out = append(out, Alarm(k))
		}
	}
	return out
}

// raiseAlarm and clearAlarm set a manual alarm; tests reach them through
// brokertest (testhook.RaiseAlarm) to exercise flow control without
// filling memory.
func (b *Broker) raiseAlarm(kind Alarm) { b.alarm.Raise(alarm.Kind(kind)) }
func (b *Broker) clearAlarm(kind Alarm) { b.alarm.Clear(alarm.Kind(kind)) }

func (b *Broker) alarmStatus() alarm.Status { return b.alarm.Status() }
