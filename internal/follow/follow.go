package follow

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/broker/meta"
)

// Target is what the follower changes: the broker's vhosts and queues.
// Each sync reports false when it failed (a store error), to be retried.
type Target interface {
	// SyncVHosts opens the vhosts created elsewhere and drops the ones
	// deleted elsewhere.
	SyncVHosts(ctx context.Context) bool
	// SyncVHost makes the vhost named name follow the store's topology.
	SyncVHost(ctx context.Context, name string) bool
	// ReloadPolicies reads the vhost's policies from the store again.
	ReloadPolicies(ctx context.Context, vhost string) bool
	// VHosts names the vhosts open here, for a reset.
	VHosts() []string
	// Observe hands c to the actor of the durable queue vhost/queue if it
	// runs here; queue "" hands it to every queue of the vhost.
	Observe(vhost, queue string, c meta.Change)
	// Parameter tells the watchers of component that a runtime parameter
	// changed.
	Parameter(component, vhost, name string)
}

// Follower queues the feed's changes for the one goroutine that applies
// them. Its zero value is not ready: use Watch.
type Follower struct {
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

// Watch subscribes to feed; the broker calls it before it reads the
// store, so that no change made after that read goes unseen.
func Watch(feed meta.ChangeFeed) *Follower {
	f := &Follower{signal: make(chan struct{}, 1)}
	f.cancelWatch = feed.Watch(f.Add)
	return f
}

// Add is the feed's callback. It runs on the store's apply goroutine, so
// it only appends and signals. A run of appends to one shard, or of moves
// of one cursor, keeps only its last change: both only grow, and the
// queue keeps the largest it saw.
func (f *Follower) Add(c meta.Change) {
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
func (f *Follower) take() []meta.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	batch := f.mu.pending
	f.mu.pending = f.mu.spare[:0]
	f.mu.spare = nil
	return batch
}

// recycle gives a processed batch's array back for the next one.
func (f *Follower) recycle(batch []meta.Change) {
	clear(batch)
	f.mu.Lock()
	f.mu.spare = batch[:0]
	f.mu.Unlock()
}

// Start starts the goroutine that applies the changes to t; the broker
// calls it once nothing can fail any more.
func (f *Follower) Start(t Target) {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done = make(chan struct{})
	go f.run(ctx, t)
}

// Stop stops watching and waits for the goroutine to exit. Safe on a nil
// Follower, before Start and more than once.
func (f *Follower) Stop() {
	if f == nil {
		return
	}
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

// ApplyPending waits for changes and applies one batch of them to t, as
// the goroutine does: for a benchmark of the follower, after Stop.
func (f *Follower) ApplyPending(ctx context.Context, t Target) {
	<-f.signal
	batch := f.take()
	apply(ctx, t, batch)
	f.recycle(batch)
}

// syncRetryAfter is how long the follower waits before it syncs again a
// vhost whose Sync failed (a store error): the change that asked for it
// is not repeated by anyone.
const syncRetryAfter = time.Second

// policyRetry prefixes, in the list of failed syncs, a vhost whose
// policies failed to reload (vhost names cannot start with a NUL).
const policyRetry = "\x00policy:"

func (f *Follower) run(ctx context.Context, t Target) {
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
					f.Add(meta.Change{Kind: meta.ChangePolicy, VHost: vh})
					continue
				}
				f.Add(meta.Change{Kind: meta.ChangeTopology, VHost: name})
			}
			clear(failed)
			continue
		}
		more := apply(ctx, t, batch)
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

// apply applies a batch in order and returns the vhosts ("" for the
// list) whose sync failed. A vhost is synced at most once per batch:
// every change in the batch was applied to the store before the batch was
// taken, so one Sync sees them all.
func apply(ctx context.Context, t Target, batch []meta.Change) (failed map[string]bool) {
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
				name = canonical(name)
			}
			if all || synced[name] {
				continue
			}
			if synced == nil {
				synced = make(map[string]bool)
			}
			synced[name] = true
			if name == "" {
				fail("", t.SyncVHosts(ctx))
			} else {
				fail(name, t.SyncVHost(ctx, name))
			}
		case meta.ChangePolicy:
			fail(policyRetry+canonical(c.VHost), t.ReloadPolicies(ctx, canonical(c.VHost)))
		case meta.ChangeReset:
			fail("", t.SyncVHosts(ctx))
			for _, vh := range t.VHosts() {
				fail(policyRetry+vh, t.ReloadPolicies(ctx, vh))
				fail(vh, t.SyncVHost(ctx, vh))
				t.Observe(vh, "", c)
			}
			all = true
		case meta.ChangeParameter:
			t.Parameter(c.Component, c.VHost, c.Name)
		case meta.ChangeAppended:
			vh, name, ok := strings.Cut(c.Shard, "\x00")
			if ok {
				t.Observe(vh, name, c)
			}
		case meta.ChangeCursor, meta.ChangeReturned, meta.ChangeTaken:
			t.Observe(c.VHost, c.Queue, c)
		}
	}
	return failed
}

// canonical maps "" to "/": both name the default vhost.
func canonical(v string) string {
	if v == "" {
		return "/"
	}
	return v
}
