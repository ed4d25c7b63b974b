package pebble

import (
	"sync/atomic"
	"time"
)

// SyncPacer spaces the write-ahead log's fsyncs out while many persistent
// records are waiting for them, so that each fsync covers more of them
// (group commit that follows the load). Open with WithSyncPacer hands it
// to Pebble as its WALMinSyncInterval, which Pebble reads after every
// sync; a Store made with PacedBy counts the persistent records it
// commits. After a sync that covered at least PacedRecords records,
// Pebble waits PacedInterval from the end of that sync before the next
// one; after a smaller sync it syncs as soon as asked. A publisher that
// waits for each confirm before the next publish is never held back (its
// syncs cover one record each), while a queue appending a batch per sync
// under load, or many queues syncing together, wait a little for the
// next batch to grow. Nothing is confirmed before its sync: the pacer
// moves fsyncs, it never skips one.
//
// The zero value is ready to use; it must not be copied after first use.
type SyncPacer struct {
	pending atomic.Int64 // persistent records committed since the last sync
}

// Pacing thresholds. A sync costs about a hundred microseconds of CPU
// (the file system's journal), whatever it covers: at tens of thousands
// of confirmed messages a second that was a tenth of the broker's CPU.
// PacedInterval stays well inside what a confirm window of a few hundred
// messages covers at such rates, so a publisher never runs out of window
// waiting for it.
const (
	PacedRecords  = 64
	PacedInterval = time.Millisecond
)

// WithSyncPacer makes Open pace the WAL's syncs with p (see SyncPacer);
// the Stores made on the DB with PacedBy(p) tell p what they commit.
func WithSyncPacer(p *SyncPacer) Option { return func(c *config) { c.pacer = p } }

// PacedBy makes the Store count its persistent records on p, the pacer
// its DB was opened with (WithSyncPacer).
func PacedBy(p *SyncPacer) StoreOption { return func(s *Store) { s.pacer = p } }

// committed counts n persistent records about to be committed with a sync.
func (p *SyncPacer) committed(n int) {
	if p != nil {
		p.pending.Add(int64(n))
	}
}

// interval is Pebble's WALMinSyncInterval: called after each sync, it
// returns how long the next sync waits from the end of this one.
func (p *SyncPacer) interval() time.Duration {
	if p.pending.Swap(0) >= PacedRecords {
		return PacedInterval
	}
	return 0
}
