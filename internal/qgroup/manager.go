package qgroup

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/multiraft"
	"github.com/warrenmq/broker/internal/qplace"
	"github.com/warrenmq/broker/internal/queueargs"
)

// MetaStore is what a Manager needs of the metadata group: its records
// (where each queue's group and replicas are written, with
// compare-and-swap), its change feed (to hear of groups declared on other
// members) and the queue declarations.
type MetaStore interface {
	meta.Records
	meta.ChangeFeed
	GetQueue(ctx context.Context, vhost, name string) (meta.Queue, error)
	// ListPolicies gives the policies whose queue-leader-locator key
	// places a new queue.
	ListPolicies(ctx context.Context, vhost string, operator bool) ([]meta.Policy, error)
}

// Fallback is where the queues without a group of their own keep their
// data: the metadata group's shards, index and cursors (classic durable
// queues, and queues declared before queue groups were turned on).
type Fallback struct {
	Shards storage.ShardStore
	Index  interface {
		unacked.Index
		unacked.Claimer
	}
	Cursors meta.Cursors
}

// Config configures a Manager.
type Config struct {
	// Self is this member's id.
	Self uint64
	// Dir holds the member's multiraft database (every queue group's log
	// and checkpoints).
	Dir string
	// Meta is the metadata group; Fallback its stores.
	Meta     MetaStore
	Fallback Fallback
	// Members returns every member's id, this one included.
	Members func(ctx context.Context) ([]uint64, error)
	// Link carries the engine's frames to the other members; what they
	// send comes in through Manager.Deliver.
	Link multiraft.Link
	// TickInterval and ElectionTicks are the groups' raft timing (the
	// metadata group's, so a member's death pauses both alike).
	TickInterval  time.Duration
	ElectionTicks int
	// Locator is the member's queue_leader_locator setting: a new
	// queue's locator when neither its policy's queue-leader-locator nor
	// its x-queue-leader-locator argument names one ("" is client-local).
	Locator string
	// Logger gets warnings; nil discards them.
	Logger *slog.Logger
}

// Manager runs one member's queue groups: one multiraft engine, the
// groups of the replicated queues, and the stores (Shards, Index,
// Cursors) that send each queue's calls to its group and every other
// queue's to the fallback. Its methods are safe for concurrent use.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	eng  *multiraft.Engine
	tr   *multiraft.LinkTransport
	feed feed

	mu      sync.Mutex
	byKey   map[meta.QueueKey]*queueGroup
	byGroup map[uint64]*queueGroup
	pending map[meta.QueueKey]bool // its record changed and was not read since
	dirty   map[meta.QueueKey]bool // its record changed and the reconciler has not read it
	full    bool                   // the replica was replaced: read every record

	cancelWatch func()
	wg          sync.WaitGroup // leadership hand-overs
	kick        chan struct{}
	stop        chan struct{}
	done        chan struct{}
}

// queueGroup is one replicated queue's group as this member knows it.
type queueGroup struct {
	key      meta.QueueKey
	group    uint64
	voters   []uint64
	learners []uint64
	leader   uint64 // the placement's first leader (0: none chosen)
	st       *state
	ready    chan struct{} // closed once the group exists on this member
}

// Open opens the member's engine, restarting the groups it holds, and
// starts following the records that place queues on groups.
func Open(cfg Config) (*Manager, error) {
	if cfg.Meta == nil || cfg.Members == nil || cfg.Link == nil || cfg.Fallback.Shards == nil || cfg.Fallback.Index == nil || cfg.Fallback.Cursors == nil {
		return nil, errors.New("qgroup: Config.Meta, Members, Link and every Fallback store are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		cfg: cfg, log: log,
		byKey: map[meta.QueueKey]*queueGroup{}, byGroup: map[uint64]*queueGroup{}, pending: map[meta.QueueKey]bool{}, dirty: map[meta.QueueKey]bool{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	// Watch before reading the records, so no placement is missed.
	m.cancelWatch = cfg.Meta.Watch(m.onChange)
	recs, err := m.scan()
	if err != nil {
		m.cancelWatch()
		return nil, err
	}
	for _, q := range recs {
		m.install(q)
	}
	m.tr = multiraft.NewLinkTransport(cfg.Self, cfg.Link, log)
	m.eng, err = multiraft.New(multiraft.Config{
		ID: cfg.Self, Dir: cfg.Dir, Transport: m.tr,
		TickInterval: cfg.TickInterval, ElectionTicks: cfg.ElectionTicks,
		NewStateMachine: m.newStateMachine, Logger: log,
	})
	if err != nil {
		m.cancelWatch()
		m.tr.Close()
		return nil, fmt.Errorf("qgroup: %w", err)
	}
	have, err := m.eng.Groups(context.Background())
	if err != nil {
		m.Close()
		return nil, err
	}
	m.mu.Lock()
	for _, id := range have {
		if q := m.byGroup[id]; q != nil {
			close(q.ready)
		}
	}
	m.mu.Unlock()
	go m.run()
	m.startMembership() // membership.go
	return m, nil
}

// Close stops following the records, then the engine and its transport.
func (m *Manager) Close() error {
	select {
	case <-m.stop:
		return nil
	default:
	}
	close(m.stop)
	<-m.done
	m.wg.Wait()
	m.cancelWatch()
	err := m.eng.Close()
	m.tr.Close()
	return err
}

// Deliver hands in what another member's engine sent over the link.
func (m *Manager) Deliver(from uint64, data []byte) error { return m.tr.Deliver(from, data) }

// Engine returns the member's engine (for status and metrics).
func (m *Manager) Engine() *multiraft.Engine { return m.eng }

func (m *Manager) newStateMachine(group uint64) multiraft.StateMachine {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q := m.byGroup[group]; q != nil {
		return q.st
	}
	// A group whose queue is gone (deleted while this member was
	// down): the next reconcile removes it.
	return newState(meta.QueueKey{}, &feed{})
}

// The records of placements: 'Q' 'q' vhost-length vhost name → group
// and replicas; 'Q' 'n' → the last group id handed out.
const (
	recordPrefix = 'Q'
	kindQueue    = 'q'
	kindCounter  = 'n'
	recVersion   = 1
)

var counterKey = []byte{recordPrefix, kindCounter}

func queueRecordKey(k meta.QueueKey) []byte {
	b := []byte{recordPrefix, kindQueue}
	b = binary.AppendUvarint(b, uint64(len(k.VHost)))
	b = append(b, k.VHost...)
	return append(b, k.Name...)
}

func parseQueueRecordKey(b []byte) (meta.QueueKey, bool) {
	if len(b) < 2 || b[0] != recordPrefix || b[1] != kindQueue {
		return meta.QueueKey{}, false
	}
	n, w := binary.Uvarint(b[2:])
	if w <= 0 || n > uint64(len(b)-2-w) {
		return meta.QueueKey{}, false
	}
	rest := b[2+w:]
	return meta.QueueKey{VHost: string(rest[:n]), Name: string(rest[n:])}, true
}

func encodePlacement(group uint64, voters, learners []uint64, leader uint64) []byte {
	e := encoder{b: []byte{recVersion}}
	e.u(group)
	e.offsets(voters)
	e.offsets(learners)
	e.u(leader)
	return e.b
}

func decodePlacement(k meta.QueueKey, v []byte) (*queueGroup, error) {
	if len(v) == 0 || v[0] != recVersion {
		return nil, fmt.Errorf("qgroup: placement of queue %q in vhost %q: unknown version", k.Name, k.VHost)
	}
	d := decoder{b: v[1:]}
	q := &queueGroup{key: k, group: d.u(), voters: d.offsets(), learners: d.offsets()}
	q.leader = d.u()
	if err := d.done(); err != nil || q.group == 0 || len(q.voters) == 0 {
		return nil, fmt.Errorf("qgroup: placement of queue %q in vhost %q: malformed", k.Name, k.VHost)
	}
	return q, nil
}

// scan reads every placement record on this member's replica.
func (m *Manager) scan() ([]*queueGroup, error) {
	var out []*queueGroup
	var bad error
	err := m.cfg.Meta.ScanRecords([]byte{recordPrefix, kindQueue}, nil, func(k, v []byte) bool {
		key, ok := parseQueueRecordKey(k)
		if !ok {
			return true
		}
		q, err := decodePlacement(key, v)
		if err != nil {
			bad = err
			return true
		}
		out = append(out, q)
		return true
	})
	if err == nil && bad != nil {
		m.log.Warn("qgroup: skipped a placement record", "err", bad)
	}
	return out, err
}

// read reads queue k's placement record; nil when it has none.
func (m *Manager) read(k meta.QueueKey) (*queueGroup, error) {
	key := queueRecordKey(k)
	var q *queueGroup
	var derr error
	err := m.cfg.Meta.ScanRecords(key, nil, func(rk, v []byte) bool {
		if bytes.Equal(rk, key) {
			q, derr = decodePlacement(k, v)
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	return q, derr
}

// install makes q the group of its queue on this member (replacing an
// older group of a queue of the same name). m.mu must not be held.
func (m *Manager) install(q *queueGroup) *queueGroup {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.byKey[q.key]; old != nil && old.group == q.group {
		return old
	}
	q.st = newState(q.key, &m.feed)
	q.ready = make(chan struct{})
	m.byKey[q.key] = q
	m.byGroup[q.group] = q
	return q
}

// onChange follows the metadata group: a placement record set marks its
// queue to be read again before its next use and by the reconciler, and
// wakes the reconciler; a reset (the replica replaced) asks it for a
// full read.
func (m *Manager) onChange(c meta.Change) {
	if c.Kind != meta.ChangeRecord && c.Kind != meta.ChangeReset {
		return
	}
	m.mu.Lock()
	if c.Kind == meta.ChangeRecord {
		k, ok := parseQueueRecordKey([]byte(c.Shard))
		if !ok {
			m.mu.Unlock()
			return
		}
		m.pending[k] = true
		m.dirty[k] = true
	} else {
		m.full = true
	}
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// reconcileEvery is how often the placement records are read whole. A
// change is otherwise applied from the feed, one record read per changed
// placement, so an idle member reads nothing between full reads. The
// full read is needed for what the feed does not tell, and repairs what
// it missed: a deletion (the groups of queues deleted on other members
// stay until it, idle, costing their heartbeat-free raft state only);
// and a placement whose change this member did not hear of (the feed is
// delivered in apply order to a watcher installed before the first read,
// and a replaced replica is told as a reset, which asks for a full read
// at once, so this is a backstop: such a queue's group would be created
// here at the full read, as on a member that was down when it was
// placed; a group whose creation failed is also retried there, and by
// every lookup of its queue). It is a variable for the tests.
var reconcileEvery = 30 * time.Second

// run creates on this member the groups the records place here, from
// the change feed (reconcileKeys), and every reconcileEvery (and after a
// reset) reads every record to remove those no record names.
func (m *Manager) run() {
	defer close(m.done)
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		full := false
		select {
		case <-m.stop:
			return
		case <-m.kick:
		case <-t.C:
			full = true
		}
		m.mu.Lock()
		keys := m.dirty
		m.dirty = map[meta.QueueKey]bool{}
		full = full || m.full
		m.full = false
		m.mu.Unlock()
		var err error
		if full {
			err = m.reconcile()
		} else {
			err = m.reconcileKeys(keys)
		}
		if err != nil {
			m.log.Warn("qgroup: reconcile", "err", err)
		}
	}
}

// reconcileKeys reads the placement records of keys, the queues the
// feed says changed, and creates their groups here: its cost is that of
// the changes, not of the queues. An absent record (deleted since) is
// left to the next full read.
func (m *Manager) reconcileKeys(keys map[meta.QueueKey]bool) error {
	for k := range keys {
		rec, err := m.read(k)
		if err != nil {
			return err
		}
		if rec == nil {
			continue
		}
		m.ensure(m.install(rec))
		m.mu.Lock()
		delete(m.pending, k)
		m.mu.Unlock()
	}
	return nil
}

// reconcile reads every placement record: it creates the groups they
// place here and removes those no record names.
func (m *Manager) reconcile() error {
	recs, err := m.scan()
	if err != nil {
		return err
	}
	named := map[uint64]bool{}
	for _, q := range recs {
		named[q.group] = true
		m.ensure(m.install(q))
		m.mu.Lock()
		delete(m.pending, q.key)
		m.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	have, err := m.eng.Groups(ctx)
	if err != nil {
		return err
	}
	for _, id := range have {
		if named[id] {
			continue
		}
		if err := m.eng.RemoveGroup(ctx, id); err != nil && !errors.Is(err, multiraft.ErrNoGroup) {
			return err
		}
		m.mu.Lock()
		if q := m.byGroup[id]; q != nil {
			delete(m.byGroup, id)
			if m.byKey[q.key] == q {
				delete(m.byKey, q.key)
			}
		}
		m.mu.Unlock()
	}
	return nil
}

// ensure creates q's group on this member if it is one of its replicas,
// in the background; q.ready closes once it exists.
func (m *Manager) ensure(q *queueGroup) {
	select {
	case <-q.ready:
		return
	default:
	}
	if !slices.Contains(q.voters, m.cfg.Self) && !slices.Contains(q.learners, m.cfg.Self) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := m.eng.CreateGroupWithLearners(ctx, q.group, q.voters, q.learners)
		if err != nil && !errors.Is(err, multiraft.ErrGroupExists) {
			m.log.Warn("qgroup: create group", "queue", q.key.Name, "vhost", q.key.VHost, "group", q.group, "err", err)
			return
		}
		if err == nil && q.leader != 0 && slices.Contains(q.voters, m.cfg.Self) {
			m.wg.Add(1)
			go func() { defer m.wg.Done(); m.handOver(q.group, q.leader) }()
		}
		m.mu.Lock()
		select {
		case <-q.ready:
		default:
			close(q.ready)
		}
		m.mu.Unlock()
	}()
}

// Replicated reports whether a declaration gets a group of its own:
// durable quorum queues and streams.
func Replicated(q meta.Queue) bool {
	if !q.Durable || q.Exclusive {
		return false
	}
	t, _, _ := queueArgs(q)
	return t == "quorum" || t == "stream"
}

// queueArgs returns a declaration's x-queue-type, initial replica count
// (x-quorum-initial-group-size, or x-initial-cluster-size for a stream;
// 0 when unset) and x-queue-leader-locator.
func queueArgs(q meta.Queue) (typ string, size int, locator string) {
	if len(q.Arguments) == 0 {
		return "", 0, ""
	}
	args, _, err := amqp.DecodeTable(q.Arguments)
	if err != nil {
		return "", 0, ""
	}
	typ, _ = args["x-queue-type"].(string)
	locator, _ = args["x-queue-leader-locator"].(string)
	name := "x-quorum-initial-group-size"
	if typ == "stream" {
		name = "x-initial-cluster-size"
	}
	if v, ok := queueargs.IntArg(args[name]); ok && v > 0 {
		size = int(min(v, 1<<16))
	}
	return typ, size, locator
}

// Declare gives q a group of its own when it is a new replicated queue:
// it allocates a group id and writes q's placement (group, voters,
// learners) to the metadata group with compare-and-swap, creates the
// group here and campaigns, so the declaring member leads
// (RabbitMQ's client-local locator). It is called before q's declaration
// is written, so every member learns of the group before the queue. A
// queue that already exists keeps where its data is.
func (m *Manager) Declare(ctx context.Context, q meta.Queue) error {
	if !Replicated(q) {
		return nil
	}
	k := q.Key()
	// The record, not this member's map: the map may still hold the group
	// of a queue of the same name deleted on another member.
	if rec, err := m.read(k); err != nil {
		return err
	} else if rec != nil {
		g := m.install(rec)
		m.ensure(g)
		return m.wait(ctx, g)
	}
	if _, err := m.cfg.Meta.GetQueue(ctx, q.VHost, q.Name); err == nil {
		return nil // declared before groups: its data stays in the metadata group
	} else if !errors.Is(err, meta.ErrNotFound) {
		return err
	}
	members, err := m.cfg.Members(ctx)
	if err != nil {
		return err
	}
	typ, size, locArg := queueArgs(q) // size 0: qplace.DefaultSize
	locPolicy, err := m.policyLocator(ctx, q, typ)
	if err != nil {
		return err
	}
	voters, learners, leader, err := m.place(ctx, members, size, qplace.ResolveLocator(locPolicy, locArg, m.cfg.Locator))
	if err != nil {
		return err
	}
	key := queueRecordKey(k)
	for range 64 {
		cur, err := m.counter()
		if err != nil {
			return err
		}
		next := binary.BigEndian.AppendUint64(nil, cur+1)
		var old []byte
		if cur > 0 {
			old = binary.BigEndian.AppendUint64(nil, cur)
		}
		ok, err := m.cfg.Meta.UpdateRecords(ctx, meta.RecordUpdate{
			Match: []meta.Record{{Key: counterKey, Value: old}, {Key: key, Value: nil}},
			Set:   []meta.Record{{Key: counterKey, Value: next}, {Key: key, Value: encodePlacement(cur+1, voters, learners, leader)}},
		})
		if err != nil {
			return fmt.Errorf("qgroup: place queue %q: %w", q.Name, err)
		}
		placed, err := m.read(k)
		if err != nil {
			return err
		}
		if placed == nil {
			if ok {
				return fmt.Errorf("qgroup: place queue %q: its placement is not readable after it was written", q.Name)
			}
			continue // the counter moved: another queue was placed meanwhile
		}
		g := m.install(placed)
		m.mu.Lock()
		delete(m.pending, k)
		m.mu.Unlock()
		m.ensure(g)
		if err := m.wait(ctx, g); err != nil {
			return err
		}
		m.settle(ctx, g)
		return nil
	}
	return fmt.Errorf("qgroup: place queue %q: the group counter kept moving", q.Name)
}

// settleFor bounds how long Declare waits for a new group's first leader.
const settleFor = 5 * time.Second

// settle waits, at most settleFor, until new group q is led by its
// placement's first leader (by any member when none was chosen), so a
// queue's first publishes and claims do not race its first election and
// hand-over: a proposal forwarded to a leader that is handing over is
// dropped by raft, and the leader change then leaves its outcome unknown
// (541 to the publisher). RabbitMQ's declaration of a quorum queue
// likewise waits: ra's start_cluster (ra 2.x) triggers an election and
// returns once the new cluster reports a leader. Past the bound the
// declaration goes on: the queue works under whichever leader it gets.
func (m *Manager) settle(ctx context.Context, q *queueGroup) {
	ctx, cancel := context.WithTimeout(ctx, settleFor)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := m.eng.Status(ctx, q.group)
		if err != nil || st.Leader != 0 && (q.leader == 0 || st.Leader == q.leader) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

func (m *Manager) counter() (uint64, error) {
	var cur uint64
	err := m.cfg.Meta.ScanRecords(counterKey, nil, func(k, v []byte) bool {
		if bytes.Equal(k, counterKey) && len(v) == 8 {
			cur = binary.BigEndian.Uint64(v)
		}
		return false
	})
	return cur, err
}

// place picks a new group's voters and first leader with qplace.Place:
// this member, then the members holding the fewest voter replicas (the
// live ones first), ties by id; the leader by loc (client-local: this
// member; balanced: the voter leading the fewest groups). Every other
// member is a learner, so every member holds every queue and serves it
// from its own copy.
func (m *Manager) place(ctx context.Context, members []uint64, size int, loc qplace.Locator) (voters, learners []uint64, leader uint64, err error) {
	view, err := qplace.LocalView(m.eng)(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	load := qplace.Loads(view)
	for id, l := range load {
		l.Replicas = 0 // learners hold every group: count voters only
		load[id] = l
	}
	for _, g := range view.Groups {
		for _, v := range g.Voters {
			l := load[v]
			l.Replicas++
			load[v] = l
		}
	}
	if !slices.Contains(members, m.cfg.Self) {
		members = append(slices.Clone(members), m.cfg.Self)
	}
	p, err := qplace.Place(members, view.Live, load, size, loc, m.cfg.Self)
	if err != nil {
		return nil, nil, 0, err
	}
	for _, id := range members {
		if !slices.Contains(p.Replicas, id) {
			learners = append(learners, id)
		}
	}
	slices.Sort(learners)
	return p.Replicas, slices.Compact(learners), p.Leader, nil
}

// handOver makes the placement's first leader lead a new group. Every
// voter runs it when it creates the group: the chosen one campaigns at
// once; whichever voter wins the election instead (the chosen one's vote
// requests reach voters that have not created the group yet and are
// lost) hands the leadership over, for a few seconds, best effort.
func (m *Manager) handOver(group, to uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if to == m.cfg.Self {
		_ = m.eng.Campaign(ctx, group)
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := m.eng.Status(ctx, group)
		switch {
		case err != nil || st.Leader == to:
			return
		case st.IsLeader:
			_ = m.eng.TransferLeader(ctx, group, to)
		}
	}
}

// Forget deletes queue k's placement and its group on this member, once
// its declaration is deleted; the other members remove theirs at their
// next full read of the records (reconcileEvery).
func (m *Manager) Forget(ctx context.Context, k meta.QueueKey) error {
	m.mu.Lock()
	q := m.byKey[k]
	m.mu.Unlock()
	if q == nil {
		return nil
	}
	if _, err := m.cfg.Meta.UpdateRecords(ctx, meta.RecordUpdate{Delete: [][]byte{queueRecordKey(k)}}); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.byKey, k)
	delete(m.byGroup, q.group)
	m.mu.Unlock()
	if err := m.eng.RemoveGroup(ctx, q.group); err != nil && !errors.Is(err, multiraft.ErrNoGroup) {
		return err
	}
	return nil
}

// lookup returns queue k's group on this member, waiting for it to
// exist here; nil when the queue has none (its data is in the fallback).
func (m *Manager) lookup(ctx context.Context, k meta.QueueKey) (*queueGroup, error) {
	m.mu.Lock()
	q, pend := m.byKey[k], m.pending[k]
	m.mu.Unlock()
	if pend {
		rec, err := m.read(k)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			q = m.install(rec)
			m.ensure(q)
		}
		m.mu.Lock()
		delete(m.pending, k)
		m.mu.Unlock()
	}
	if q == nil {
		return nil, nil
	}
	if !slices.Contains(q.voters, m.cfg.Self) && !slices.Contains(q.learners, m.cfg.Self) {
		return nil, fmt.Errorf("qgroup: queue %q in vhost %q has no replica on member %d", k.Name, k.VHost, m.cfg.Self)
	}
	m.ensure(q)
	return q, m.wait(ctx, q)
}

func (m *Manager) wait(ctx context.Context, q *queueGroup) error {
	select {
	case <-q.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-m.stop:
		return multiraft.ErrClosed
	}
}

// propose runs cmd in q's group. An error after which the command may
// have committed matches storage.ErrOutcomeUnknown.
func (m *Manager) propose(ctx context.Context, q *queueGroup, cmd []byte) ([]byte, error) {
	ctxErr := ctx.Err()
	if ctxErr != nil {
		return nil, ctxErr
	}
	out, err := m.eng.Propose(ctx, q.group, cmd)
	switch {
	case err == nil:
		if out == nil {
			return nil, fmt.Errorf("qgroup: queue %q: the group refused a malformed command", q.key.Name)
		}
		return out, nil
	case errors.Is(err, multiraft.ErrLeaderChanged), errors.Is(err, multiraft.ErrProposalLost),
		errors.Is(err, multiraft.ErrClosed), errors.Is(err, multiraft.ErrGroupRemoved),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w: queue %q: %w", storage.ErrOutcomeUnknown, q.key.Name, err)
	}
	return nil, fmt.Errorf("qgroup: queue %q: %w", q.key.Name, err)
}

// Status is a queue group's raft state on this member, for the
// management API and metrics.
type Status struct {
	Group    uint64
	Leader   uint64
	Term     uint64
	Commit   uint64
	Voters   []uint64
	Learners []uint64
	Quiesced bool
}

// Status returns queue k's group state on this member; false when it has
// no group (or none here yet).
func (m *Manager) Status(ctx context.Context, k meta.QueueKey) (Status, bool) {
	m.mu.Lock()
	q := m.byKey[k]
	m.mu.Unlock()
	if q == nil {
		return Status{}, false
	}
	st, err := m.eng.Status(ctx, q.group)
	if err != nil {
		return Status{Group: q.group, Voters: q.voters, Learners: q.learners}, true
	}
	return Status{Group: q.group, Leader: st.Leader, Term: st.Term, Commit: st.Commit, Voters: st.Voters, Learners: st.Learners, Quiesced: st.Quiesced}, true
}

// Leaders counts, per member id, the groups this member believes it
// leads or sees led (for the rebalancing view and tests).
func (m *Manager) Leaders(ctx context.Context) map[uint64]int {
	m.mu.Lock()
	ids := make([]uint64, 0, len(m.byGroup))
	for id := range m.byGroup {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	out := map[uint64]int{}
	for _, id := range ids {
		if st, err := m.eng.Status(ctx, id); err == nil && st.Leader != 0 {
			out[st.Leader]++
		}
	}
	return out
}

// Watch is the queue groups' change feed (see meta.ChangeFeed): appends,
// cursor moves, requeues and takes applied on this member.
func (m *Manager) Watch(fn func(meta.Change)) (cancel func()) { return m.feed.watch(fn) }

// queueOfShard parses a shard name (ShardName).
func queueOfShard(shard string) (meta.QueueKey, bool) {
	vh, name, ok := strings.Cut(shard, "\x00")
	return meta.QueueKey{VHost: vh, Name: name}, ok
}

// Keys lists the queues with a group on this member, in no order.
func (m *Manager) Keys() []meta.QueueKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]meta.QueueKey, 0, len(m.byKey))
	for k := range m.byKey {
		out = append(out, k)
	}
	return out
}
