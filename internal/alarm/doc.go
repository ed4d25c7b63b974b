// Package alarm is the broker's resource alarms: RabbitMQ's memory and disk
// alarms, the monitor goroutine that samples them, and the manual alarms
// tests raise.
//
// While an alarm is raised, every connection that publishes is blocked: on
// reading a basic.publish its reader sends connection.blocked (to clients
// that announced the capability, as amqp091-go does) and stops reading the
// socket until every alarm cleared, then sends connection.unblocked and goes
// on. Connections that only consume are never blocked, so consumers drain
// the queues; a publish on the direct Channel waits instead. The Monitor
// owns the gate (session.Alarms) every connection obeys.
//
// One monitor goroutine, started by Monitor.Start and stopped by
// Monitor.Stop, owns the monitored alarms: every memory poll it adds up the
// message bytes held in memory (the stores that report it, what the
// connections buffer, and Held) and compares them with the memory limit;
// every disk poll (more often when free space is within twice the threshold
// of running out, as RabbitMQ 4.x polls up to ten times a second near its
// limit) it reads the free space of the data directory's file system and
// compares it with the free-disk limit plus the headroom Pebble may claim
// at once (a WAL and a memtable flush, DiskReserve.Headroom). Start takes
// the first samples itself, so a broker started on a full disk serves no
// publish before its alarm is up. An alarm clears as soon as its measure is
// back under the limit (RabbitMQ has no hysteresis either). Raise and Clear
// set a manual alarm of each kind, OR-ed with the monitored one.
//
// A full disk is an alarm, never a crash: Pebble cannot survive a refused
// WAL or MANIFEST write, so the data directory holds a reserve file
// (storage/pebble.DiskReserve) that is deleted the moment a write fails
// with ENOSPC. That write is retried in the space it frees, the disk alarm
// is raised at once (DiskFull), and consumers drain on the reserve's space.
// Free space is measured without the missing reserve, so deleting it does
// not clear the alarm; once the alarm clears, the monitor recreates it.
// The reserve is sized by what Pebble's memtables hold; before each sample
// the monitor lets it grow with them (DiskReserve.Resize), and growth not
// yet allocated counts as missing.
package alarm
