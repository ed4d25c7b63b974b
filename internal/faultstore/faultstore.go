package faultstore

import (
	"errors"
	"slices"
	"sync"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// ErrInjected is the default error of a Fail rule.
var ErrInjected = errors.New("faultstore: injected failure")

// ErrCrashed is what every call returns once a CrashAt rule fired.
var ErrCrashed = errors.New("faultstore: crashed")

// Op names a store method.
type Op string

// The ShardStore methods.
const (
	Append          Op = "Append"
	Read            Op = "Read"
	DeleteByOffsets Op = "DeleteByOffsets"
	FirstOffset     Op = "FirstOffset"
	Count           Op = "Count"
	DeleteShard     Op = "DeleteShard"
	Sync            Op = "Sync"
)

// The meta.Store methods that are injected (accounts and IsLeader pass
// through).
const (
	Offset               Op = "Offset"
	CompareAndSwapOffset Op = "CompareAndSwapOffset"
	PutExchange          Op = "PutExchange"
	GetExchange          Op = "GetExchange"
	DeleteExchange       Op = "DeleteExchange"
	ListExchanges        Op = "ListExchanges"
	PutQueue             Op = "PutQueue"
	GetQueue             Op = "GetQueue"
	DeleteQueue          Op = "DeleteQueue"
	ListQueues           Op = "ListQueues"
	PutBinding           Op = "PutBinding"
	DeleteBinding        Op = "DeleteBinding"
	ListBindings         Op = "ListBindings"
)

// The unacked.Index methods.
const (
	IndexPut         Op = "Index.Put"
	IndexGet         Op = "Index.Get"
	IndexDelete      Op = "Index.Delete"
	IndexQueue       Op = "Index.Queue"
	IndexScan        Op = "Index.Scan"
	IndexDeleteQueue Op = "Index.DeleteQueue"
)

// Call describes one store call: the method and the arguments a rule may
// look at. Slices alias the caller's and must not be kept or changed by a
// Match; Trace hands out copies.
type Call struct {
	Op Op
	// Shard is the shard of a ShardStore call.
	Shard string
	// Records are Append's records.
	Records []storage.Record
	// Offsets are DeleteByOffsets' offsets.
	Offsets []uint64
	// From is Read's start offset.
	From uint64
	// Queue names the queue of a cursor call, of Index.Queue and
	// Index.DeleteQueue, and of queue topology calls.
	Queue meta.QueueKey
	// Old and New are CompareAndSwapOffset's offsets.
	Old, New uint64
	// Entries are Index.Put's entries.
	Entries []unacked.Entry
	// Keys are Index.Delete's keys (one for Index.Get).
	Keys []unacked.Key
	// Err is what the call returned (set in Trace only; a failed injected
	// call has ErrInjected, ErrCrashed or the rule's error).
	Err error
	// Injected reports that the wrapper failed the call without running it.
	Injected bool
}

// Match selects calls. It runs under the Injector's lock.
type Match func(c *Call) bool

// On matches calls of any of ops.
func On(ops ...Op) Match {
	return func(c *Call) bool { return slices.Contains(ops, c.Op) }
}

// And matches calls both m and n match; n is asked only when m matched, so
// a counting matcher (Nth) may come second.
func (m Match) And(n Match) Match {
	return func(c *Call) bool { return m(c) && n(c) }
}

// Nth matches the n-th call (from 1) that m matches, and no other. It
// counts, so use a fresh one per rule.
func Nth(n int, m Match) Match {
	seen := 0
	return func(c *Call) bool {
		if !m(c) {
			return false
		}
		seen++
		return seen == n
	}
}

// PutState matches Index.Put calls that write at least one entry in state s:
// Returned for the requeue primitive, Delivered for claims.
func PutState(s unacked.State) Match {
	return func(c *Call) bool {
		if c.Op != IndexPut {
			return false
		}
		for i := range c.Entries {
			if c.Entries[i].State == s {
				return true
			}
		}
		return false
	}
}

// Rule is an installed Fail, CrashAt or Block rule.
type Rule struct {
	match   Match
	times   int // calls left to act on; <0 unlimited
	err     error
	crash   bool
	hits    int
	fired   chan struct{}
	release chan struct{} // Block rules: closed by Release
	once    sync.Once
}

// Fired is closed the first time the rule acts on a call.
func (r *Rule) Fired() <-chan struct{} { return r.fired }

// Release lets the call a Block rule holds (and any later one) go on. It is
// safe to call more than once, and on rules of other kinds (it does
// nothing).
func (r *Rule) Release() {
	if r.release != nil {
		r.once.Do(func() { close(r.release) })
	}
}

// Injector decides which calls fail. The zero value is not usable; call
// New.
type Injector struct {
	mu      sync.Mutex
	rules   []*Rule
	held    []*Rule // Block rules that fired: Crash releases them
	crashed bool
	crash   chan struct{}
	counts  map[Op]int
	trace   []Call
	tracing bool
}

// New returns an Injector with no rules that records a trace.
func New() *Injector {
	return &Injector{crash: make(chan struct{}), counts: make(map[Op]int), tracing: true}
}

// Fail makes the next times calls that match fail with err (ErrInjected
// when nil) without reaching the inner store; times <= 0 means every
// matching call.
func (in *Injector) Fail(m Match, times int, err error) *Rule {
	if err == nil {
		err = ErrInjected
	}
	if times <= 0 {
		times = -1
	}
	return in.add(&Rule{match: m, times: times, err: err, fired: make(chan struct{})})
}

// CrashAt makes the first call that matches, and every call after it on any
// wrapper of this Injector, fail with ErrCrashed without reaching the inner
// stores.
func (in *Injector) CrashAt(m Match) *Rule {
	return in.add(&Rule{match: m, times: 1, err: ErrCrashed, crash: true, fired: make(chan struct{})})
}

// Block makes the first call that matches wait, before it reaches the inner
// store, until the rule's Release; then it runs normally. Fired tells when
// the call arrived. Tests use it to hold a store call while they line up
// work behind it.
func (in *Injector) Block(m Match) *Rule {
	return in.add(&Rule{match: m, times: 1, fired: make(chan struct{}), release: make(chan struct{})})
}

func (in *Injector) add(r *Rule) *Rule {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = append(in.rules, r)
	return r
}

// Crash crashes the stores now, as a CrashAt rule that fired would: every
// later call on every wrapper fails with ErrCrashed without reaching the
// inner stores, until Clear, and so does every call a Block rule holds
// (it is released to fail). A call already past the Injector finishes,
// as a write the kernel had taken before a kill -9 does. Crashing twice
// is harmless.
func (in *Injector) Crash() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.crashed {
		in.crashed = true
		close(in.crash)
	}
	// A dead process's stalled writes never land: let the held calls go,
	// to fail (before checks the crash again).
	for _, r := range in.held {
		r.Release()
	}
	in.held = nil
}

// Crashed is closed once a CrashAt rule fired or Crash was called.
func (in *Injector) Crashed() <-chan struct{} { return in.crash }

// IsCrashed reports whether a CrashAt rule fired or Crash was called.
func (in *Injector) IsCrashed() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.crashed
}

// Clear removes every rule and ends a crash, so the wrappers pass calls
// through again (a "restarted" process on the same stores). Counts and the
// trace are kept.
func (in *Injector) Clear() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = nil
	if in.crashed {
		in.crashed = false
		in.crash = make(chan struct{})
	}
}

// Count returns how many calls of op the wrappers saw, failed ones
// included.
func (in *Injector) Count(op Op) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.counts[op]
}

// SetTracing turns the trace on or off (it is on after New); benchmarks
// and long tests turn it off to keep memory flat.
func (in *Injector) SetTracing(on bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.tracing = on
}

// Trace returns a copy of every call seen while tracing was on, in order,
// with its outcome.
func (in *Injector) Trace() []Call {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]Call, len(in.trace))
	copy(out, in.trace)
	return out
}

// before decides the fate of call c: a non-nil error means fail it without
// running it. A Block rule makes it wait here, outside the lock.
func (in *Injector) before(c *Call) error {
	wait, err := in.decide(c)
	if wait != nil {
		<-wait
		in.mu.Lock()
		crashed := in.crashed
		in.mu.Unlock()
		if crashed {
			// Released by Crash: the call dies with the process.
			return in.record(c, ErrCrashed)
		}
	}
	return err
}

// record records an injected failure of c.
func (in *Injector) record(c *Call, err error) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.recordLocked(c, err, true)
}

func (in *Injector) decide(c *Call) (wait chan struct{}, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.counts[c.Op]++
	if in.crashed {
		return nil, in.recordLocked(c, ErrCrashed, true)
	}
	for i, r := range in.rules {
		if r.times == 0 || !r.match(c) {
			continue
		}
		r.hits++
		if r.hits == 1 {
			close(r.fired)
		}
		if r.times > 0 {
			r.times--
		}
		if r.times == 0 {
			in.rules = slices.Delete(in.rules, i, i+1)
		}
		if r.release != nil {
			in.held = append(in.held, r)
			return r.release, nil
		}
		if r.crash {
			in.crashed = true
			close(in.crash)
		}
		return nil, in.recordLocked(c, r.err, true)
	}
	return nil, nil
}

// after records a call that ran.
func (in *Injector) after(c *Call, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.recordLocked(c, err, false)
}

func (in *Injector) recordLocked(c *Call, err error, injected bool) error {
	if in.tracing {
		t := *c
		t.Records = slices.Clone(c.Records)
		t.Offsets = slices.Clone(c.Offsets)
		t.Entries = slices.Clone(c.Entries)
		t.Keys = slices.Clone(c.Keys)
		t.Err = err
		t.Injected = injected
		in.trace = append(in.trace, t)
	}
	return err
}

// do runs fn unless the Injector fails c, and records the outcome.
func (in *Injector) do(c *Call, fn func() error) error {
	if err := in.before(c); err != nil {
		return err
	}
	err := fn()
	in.after(c, err)
	return err
}
