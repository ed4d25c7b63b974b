package meta

import "context"

// deferSyncKey marks a context whose durable writes may skip the fsync.
type deferSyncKey struct{}

// DeferSync returns a context under which a Store may write durable
// changes without waiting for them to reach disk: a bulk change (a
// definitions import of 100,000 queues) then costs one fsync at its end
// instead of one per entity. The caller must call Sync on the store (if
// it is a Syncer) before it reports the changes done. A store that has
// no such shortcut ignores it: meta/local honours it, meta/memory has
// nothing to sync and meta/raft commits every proposal through its log.
func DeferSync(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferSyncKey{}, true)
}

// SyncDeferred reports whether ctx came from DeferSync.
func SyncDeferred(ctx context.Context) bool {
	v, _ := ctx.Value(deferSyncKey{}).(bool)
	return v
}

// Syncer is implemented by a Store whose writes can be left unsynced
// (DeferSync): Sync returns once every write before it is on disk.
type Syncer interface {
	Sync(ctx context.Context) error
}
