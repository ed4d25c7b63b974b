// Package follow is a shared-mode broker's follower: it watches the
// change feed of a metadata store other brokers write too (meta.ChangeFeed)
// and applies the changes to this broker's vhosts and queues, through the
// small Target interface the broker implements.
//
// It promises that changes are applied in the order the feed gave them, by
// one goroutine (started by Start, stopped by Stop); that the feed's
// callback only appends and signals, so it never holds up the store's
// apply goroutine; that a vhost is synced at most once per batch (a burst
// of declarations costs as many syncs as the follower has time for, not
// one per change); and that a sync that failed is retried a second later,
// since no one repeats the change that asked for it.
package follow
