package broker

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
)

// Shared mode: Options.Meta implements meta.ChangeFeed, so other brokers
// (a cluster's other nodes) write the same stores, and every one of them
// serves the durable queues. What this broker does about it:
//
//   - New watches the feed before it reads anything, and one goroutine
//     (started by New, stopped by Close) applies the changes in order:
//     a topology change of a vhost makes the vhost Sync with the store
//     (vhost.VHost.Sync: exchanges, durable non-exclusive queues and the
//     bindings between what is here follow the store; a queue another
//     broker deleted is stopped here and its consumers get basic.cancel);
//     a change of the vhost list opens the vhosts created elsewhere and
//     closes the ones deleted elsewhere (their connections here are
//     closed with 320, as DeleteVHost does); appends, cursor moves,
//     requeues and claims go to the queue's actor (queue.Queue.Observe);
//     a reset (the replica was replaced) syncs every vhost and passes the
//     reset to every queue. A Sync reads the vhost's whole topology, so
//     changes are taken in batches and a vhost is synced once per batch:
//     under a burst of declarations the follower syncs as often as it can,
//     not once per change. A Sync that fails (a store error) is retried a
//     second later.
//   - Durable queues run with queue.Config.Shared: they claim through
//     unacked.Claimer and keep transient messages at start (another
//     broker may be delivering them).
//   - At start nothing is deleted as "left by an earlier run": non-durable
//     exchanges, non-durable and exclusive queues and bindings with an
//     end missing here may belong to a live broker (vhost.Config.Shared).
//     Non-durable and exclusive queues stay on the broker that declared
//     them, with their messages in its memory; the others do not see them.
//   - The unacked scanner runs on every broker: each enforces the consumer
//     timeout on its own deliveries and returns its own whose connection or
//     run is gone; only the meta leader returns another broker's, and only
//     once Options.PeerAlive reports that broker dead.

// followState is the shared-mode follower: changes from the feed's
// callback wait in a list for the one goroutine that applies them.
type followState struct {
	feed        meta.ChangeFeed // nil: not shared
	cancelWatch func()
	signal      chan struct{} // capacity 1: "the list is not empty"
	cancel      context.CancelFunc
	done        chan struct{}

	mu struct {
		sync.Mutex
		pending []meta.Change
		spare   []meta.Change // the last batch's array, for reuse
	}
}

// watchChanges subscribes to the feed of a shared store; New calls it
// before it reads the store.
func (b *Broker) watchChanges() {
	feed, ok := b.opts.Meta.(meta.ChangeFeed)
	if !ok {
		return
	}
	f := &b.follow
	f.feed = feed
	f.signal = make(chan struct{}, 1)
	f.cancelWatch = feed.Watch(f.add)
}

// add is the feed's callback. It runs on the store's apply goroutine, so
// it only appends and signals. A run of appends to one shard, or of moves
// of one cursor, keeps only its last change: both only grow, and the
// queue keeps the largest it saw.
func (f *followState) add(c meta.Change) {
	f.mu.Lock()
	if n := len(f.mu.pending); n > 0 && supersedes(c, f.mu.pending[n-1]) {
		f.mu.pending[n-1] = c
	} else {
		f.mu.pending = append(f.mu.pending, c)
	}
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

func supersedes(c, prev meta.Change) bool {
	if c.Kind != prev.Kind || c.Offset < prev.Offset {
		return false
	}
	switch c.Kind {
	case meta.ChangeAppended:
		return c.Shard == prev.Shard
	case meta.ChangeCursor:
		return c.VHost == prev.VHost && c.Queue == prev.Queue
	}
	return false
}

// take hands the follower everything pending.
func (f *followState) take() []meta.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	batch := f.mu.pending
	f.mu.pending = f.mu.spare[:0]
	f.mu.spare = nil
	return batch
}

// recycle gives a processed batch's array back for the next one.
func (f *followState) recycle(batch []meta.Change) {
	clear(batch)
	f.mu.Lock()
	f.mu.spare = batch[:0]
	f.mu.Unlock()
}

// startFollowing starts the follower goroutine; New calls it once nothing
// can fail any more.
func (b *Broker) startFollowing() {
	f := &b.follow
	if f.feed == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done = make(chan struct{})
	go b.runFollower(ctx)
}

// stopFollowing stops watching and waits for the follower to exit. Safe
// when not shared or not started.
func (b *Broker) stopFollowing() {
	f := &b.follow
	if f.cancelWatch != nil {
		f.cancelWatch()
		f.cancelWatch = nil
	}
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

// syncRetryAfter is how long the follower waits before it syncs again a
// vhost whose Sync failed (a store error): the change that asked for it
// is not repeated by anyone.
const syncRetryAfter = time.Second

func (b *Broker) runFollower(ctx context.Context) {
	f := &b.follow
	defer close(f.done)
	retry := time.NewTimer(syncRetryAfter)
	retry.Stop()
	defer retry.Stop()
	var failed map[string]bool // vhosts ("" the list) to sync again
	for {
		var batch []meta.Change
		select {
		case <-ctx.Done():
			return
		case <-f.signal:
			batch = f.take()
		case <-retry.C:
			// Queued like any change, so they keep their place in the
			// order.
			for name := range failed {
				if vh, ok := strings.CutPrefix(name, policyRetry); ok {
					f.add(meta.Change{Kind: meta.ChangePolicy, VHost: vh})
					continue
				}
				f.add(meta.Change{Kind: meta.ChangeTopology, VHost: name})
			}
			clear(failed)
			continue
		}
		more := b.applyChanges(ctx, batch)
		f.recycle(batch)
		if len(more) > 0 && ctx.Err() == nil {
			if len(failed) == 0 {
				retry.Reset(syncRetryAfter)
			}
			if failed == nil {
				failed = make(map[string]bool)
			}
			maps.Copy(failed, more)
		}
	}
}

// applyChanges applies a batch in order and returns the vhosts ("" for
// the list) whose sync failed. A vhost is synced at most once per batch:
// every change in the batch was applied to the store before the batch was
// taken, so one Sync sees them all.
func (b *Broker) applyChanges(ctx context.Context, batch []meta.Change) (failed map[string]bool) {
	var synced map[string]bool // by vhost; "" is the vhost list
	all := false               // a reset synced everything
	fail := func(name string, ok bool) {
		if !ok {
			if failed == nil {
				failed = make(map[string]bool)
			}
			failed[name] = true
		}
	}
	for _, c := range batch {
		if ctx.Err() != nil {
			return failed
		}
		switch c.Kind {
		case meta.ChangeTopology:
			name := c.VHost
			if name != "" {
				name = canonicalVHost(name)
			}
			if all || synced[name] {
				continue
			}
			if synced == nil {
				synced = make(map[string]bool)
			}
			synced[name] = true
			if name == "" {
				fail("", b.syncVHosts(ctx))
			} else {
				fail(name, b.syncVHost(ctx, name))
			}
		case meta.ChangePolicy:
			fail(policyRetry+canonicalVHost(c.VHost), b.reloadPolicies(ctx, canonicalVHost(c.VHost)))
		case meta.ChangeReset:
			fail("", b.syncVHosts(ctx))
			for _, vh := range b.openVHostList() {
				fail(policyRetry+vh.Name(), b.reloadPolicies(ctx, vh.Name()))
				fail(vh.Name(), b.syncVHost(ctx, vh.Name()))
				for _, q := range vh.Queues() {
					q.Observe(c)
				}
			}
			all = true
		case meta.ChangeParameter:
			b.notifyParameter(c.Component, c.VHost, c.Name)
		case meta.ChangeAppended:
			vh, name, ok := strings.Cut(c.Shard, "\x00")
			if ok {
				b.observe(vh, name, c)
			}
		case meta.ChangeCursor, meta.ChangeReturned, meta.ChangeTaken:
			b.observe(c.VHost, c.Queue, c)
		}
	}
	return failed
}

// observe hands c to the actor of the shared queue vh/name, if it runs
// here.
func (b *Broker) observe(vh, name string, c meta.Change) {
	v, ok := b.lookupVHost(vh)
	if !ok {
		return
	}
	if q, ok := v.LookupQueue(name); ok && q.Def.Durable {
		q.Observe(c)
	}
}

// syncVHost syncs one vhost with the store; false means it failed.
func (b *Broker) syncVHost(ctx context.Context, name string) bool {
	vh, ok := b.lookupVHost(name)
	if !ok {
		return true
	}
	if err := vh.Sync(ctx); err != nil {
		if ctx.Err() == nil {
			b.log.Warn("broker: following vhost topology", "vhost", name, "err", err)
		}
		return false
	}
	return true
}

func (b *Broker) openVHostList() []*vhost.VHost {
	b.vhostsMu.RLock()
	defer b.vhostsMu.RUnlock()
	out := make([]*vhost.VHost, 0, len(b.vhosts))
	for _, vh := range b.vhosts {
		out = append(out, vh)
	}
	return out
}

// syncVHosts opens the vhosts another broker created and drops the ones
// another broker deleted; false means something failed.
func (b *Broker) syncVHosts(ctx context.Context) bool {
	stored, err := b.stores.Meta.ListVHosts(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("broker: following vhosts", "err", err)
		}
		return false
	}
	ok := true
	names := make(map[string]bool, len(stored))
	records := make(map[string]meta.VHost, len(stored))
	for _, v := range stored {
		v.Name = canonicalVHost(v.Name)
		names[v.Name] = true
		records[v.Name] = v
	}
	var gone []*vhost.VHost
	b.vhostsMu.Lock()
	for name := range names {
		if _, open := b.vhosts[name]; open || b.deleting[name] {
			continue
		}
		if err := b.openVHostLocked(ctx, records[name], false); err != nil {
			b.log.Warn("broker: opening vhost created elsewhere", "vhost", name, "err", err)
			ok = false
		}
	}
	for name, vh := range b.vhosts {
		if !names[name] {
			gone = append(gone, vh)
			delete(b.vhosts, name)
		}
	}
	b.vhostsMu.Unlock()
	for _, vh := range gone {
		b.dropVHost(ctx, vh)
	}
	// Another broker may have changed a vhost's metadata or limits.
	return b.refreshVHostSettings(ctx, stored) && ok
}

// dropVHost closes a vhost another broker deleted (with everything of it
// in the store): its connections here are closed with 320, as DeleteVHost
// does, the queues that lived here only are deleted with their messages,
// and the shared ones are stopped.
func (b *Broker) dropVHost(ctx context.Context, vh *vhost.VHost) {
	name := vh.Name()
	b.closeConnectionsOf(func(in session.ConnInfo) bool { return canonicalVHost(in.VHost) == name },
		fmt.Sprintf("vhost '%s' is deleted", name))
	for _, q := range vh.Queues() {
		if q.Def.Durable {
			continue // the deleting broker deleted its messages
		}
		if _, err := vh.DeleteQueue(ctx, q.Def.Owner, q.Def.Name, false, false); err != nil {
			b.log.Warn("broker: deleting a queue of a deleted vhost", "vhost", name, "queue", q.Def.Name, "err", err)
		}
	}
	vh.Close()
	b.acct.mu.Lock()
	for k, a := range b.acct.mu.access {
		if k.vhost == name {
			a.Set(nil)
		}
	}
	b.acct.mu.Unlock()
	b.log.Info("broker: vhost deleted by another broker", "vhost", name)
}
