package qgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warrenmq/broker/meta"

	"github.com/warrenmq/broker/internal/multiraft"
	"github.com/warrenmq/broker/internal/qplace"
)

// The refusals of a membership change (AddMember, DeleteMember).
var (
	// ErrNoGroup: the queue has no raft group of its own (it is not a
	// replicated queue, or its data stayed in the metadata group).
	ErrNoGroup = errors.New("qgroup: the queue has no raft group of its own")
	// ErrNotMember: the member named is not one of the cluster's.
	ErrNotMember = errors.New("qgroup: not a cluster member")
	// ErrMemberDown: the member to add is not running (this member does
	// not hear from it).
	ErrMemberDown = errors.New("qgroup: the member is not running")
	// ErrLastReplica: the member holds the group's only voter
	// (RabbitMQ's last_node).
	ErrLastReplica = qplace.ErrLastReplica
)

// A membership change is asked for by writing the group's target — the
// voters and learners it is to have — to the metadata group's records
// under 'Q' 't' (beside the placement, 'Q' 'q'), by compare-and-swap, so
// that changes asked on two members at once compose. Whichever member
// leads the group then changes the raft configuration one step at a time
// (driveMembership): a new voter joins as a learner and is promoted once
// its log matches the leader's, so no quorum counts a replica still
// catching up; a removed leader hands its leadership over first. When the
// configuration is the target, the leader writes it as the placement and
// deletes the target. The change survives the leader's death: the next
// leader finds the target and carries on.
const (
	kindTarget    = 't'
	targetVersion = 1
	// membershipPoll is how often each member looks for targets (an
	// empty range read when none is pending) and the asker for the
	// placement that ends its change.
	membershipPoll = 50 * time.Millisecond
)

func targetKey(k meta.QueueKey) []byte {
	b := queueRecordKey(k)
	b[1] = kindTarget
	return b
}

func encodeTarget(voters, learners []uint64) []byte {
	e := encoder{b: []byte{targetVersion}}
	e.offsets(voters)
	e.offsets(learners)
	return e.b
}

func decodeTarget(v []byte) (voters, learners []uint64, err error) {
	if len(v) == 0 || v[0] != targetVersion {
		return nil, nil, errors.New("qgroup: membership target: unknown version")
	}
	d := decoder{b: v[1:]}
	voters, learners = d.offsets(), d.offsets()
	if err := d.done(); err != nil || len(voters) == 0 {
		return nil, nil, errors.New("qgroup: membership target: malformed")
	}
	return voters, learners, nil
}

// rawRecord reads one record's value on this member's replica; nil when
// there is none.
func (m *Manager) rawRecord(key []byte) ([]byte, error) {
	var out []byte
	err := m.cfg.Meta.ScanRecords(key, nil, func(k, v []byte) bool {
		if bytes.Equal(k, key) {
			out = slices.Clone(v)
		}
		return false
	})
	return out, err
}

// Placement is where a queue's group is, as the metadata group records
// it: the group, its voters and its learners.
type Placement struct {
	Group    uint64
	Voters   []uint64
	Learners []uint64
}

// Placement returns queue k's recorded placement; false when it has no
// group of its own.
func (m *Manager) Placement(k meta.QueueKey) (Placement, bool, error) {
	q, err := m.read(k)
	if err != nil || q == nil {
		return Placement{}, false, err
	}
	return Placement{Group: q.group, Voters: q.voters, Learners: q.learners}, true, nil
}

// AddMember makes member a voter of queue k's group, as RabbitMQ's
// `rabbitmq-queues add_member` (rabbit_quorum_queue:add_member) does:
// idempotent when it already is one, ErrNotMember for a member the
// cluster does not have, ErrMemberDown for one not running, ErrNoGroup
// for a queue without a group. It returns once the placement names
// member a voter (the group's leader promoted it after it caught up), or
// with ctx's error, after which the change still completes when it can.
func (m *Manager) AddMember(ctx context.Context, k meta.QueueKey, member uint64) error {
	if err := m.checkMember(ctx, member, true); err != nil {
		return err
	}
	return m.changeMembers(ctx, k, member, true)
}

// DeleteMember removes member's voter from queue k's group, as
// `rabbitmq-queues delete_member` does: idempotent when it is not one,
// ErrLastReplica when it is the only one. When every member holds the
// group (every non-voter a learner, so each serves the queue from its own
// copy), member stays a learner; otherwise it leaves the group, and
// removes its copy. It returns once the placement no longer names member
// a voter, or with ctx's error.
func (m *Manager) DeleteMember(ctx context.Context, k meta.QueueKey, member uint64) error {
	if err := m.checkMember(ctx, member, false); err != nil {
		return err
	}
	return m.changeMembers(ctx, k, member, false)
}

// checkMember refuses an id the cluster does not have and, when running
// is set, one this member does not hear from.
func (m *Manager) checkMember(ctx context.Context, member uint64, running bool) error {
	members, err := m.cfg.Members(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(members, member) {
		return fmt.Errorf("%w: %d", ErrNotMember, member)
	}
	if !running {
		return nil
	}
	alive, err := m.eng.Alive(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(alive, member) {
		return fmt.Errorf("%w: %d", ErrMemberDown, member)
	}
	return nil
}

func (m *Manager) changeMembers(ctx context.Context, k meta.QueueKey, member uint64, add bool) error {
	pkey, tkey := queueRecordKey(k), targetKey(k)
	for range 64 {
		praw, err := m.rawRecord(pkey)
		if err != nil {
			return err
		}
		if praw == nil {
			return fmt.Errorf("%w: queue %q in vhost %q", ErrNoGroup, k.Name, k.VHost)
		}
		rec, err := decodePlacement(k, praw)
		if err != nil {
			return err
		}
		traw, err := m.rawRecord(tkey)
		if err != nil {
			return err
		}
		voters, learners := rec.voters, rec.learners
		if traw != nil {
			if voters, learners, err = decodeTarget(traw); err != nil {
				return err
			}
		}
		if slices.Contains(voters, member) == add {
			return m.awaitPlacement(ctx, k, member, add) // asked already
		}
		wantV, wantL := targetAfter(voters, learners, rec, member, add, m.allMembers(ctx))
		if len(wantV) == 0 {
			return fmt.Errorf("%w: queue %q in vhost %q on member %d", ErrLastReplica, k.Name, k.VHost, member)
		}
		up := meta.RecordUpdate{
			Match: []meta.Record{{Key: pkey, Value: praw}, {Key: tkey, Value: traw}},
			Set:   []meta.Record{{Key: tkey, Value: encodeTarget(wantV, wantL)}},
		}
		if add && !slices.Contains(rec.voters, member) && !slices.Contains(rec.learners, member) {
			// The new member creates the group, as a learner, once the
			// placement names it; the leader adds it to the configuration.
			up.Set = append(up.Set, meta.Record{Key: pkey,
				Value: encodePlacement(rec.group, rec.voters, sortedWith(rec.learners, member), rec.leader)})
		}
		ok, err := m.cfg.Meta.UpdateRecords(ctx, up)
		if err != nil {
			return fmt.Errorf("qgroup: queue %q: membership: %w", k.Name, err)
		}
		if ok {
			return m.awaitPlacement(ctx, k, member, add)
		}
	}
	return fmt.Errorf("qgroup: queue %q: membership: its placement kept changing", k.Name)
}

// targetAfter is the voters and learners a group is to have once member
// is added (a voter, no longer a learner) or removed from voters
// (kept as a learner when every member holds the group, so that it still
// serves the queue from its own copy).
func targetAfter(voters, learners []uint64, rec *queueGroup, member uint64, add bool, all []uint64) (wantV, wantL []uint64) {
	if add {
		return sortedWith(voters, member), slices.DeleteFunc(slices.Clone(learners), func(id uint64) bool { return id == member })
	}
	wantV = slices.DeleteFunc(slices.Clone(voters), func(id uint64) bool { return id == member })
	everyone := len(all) > 0
	for _, id := range all {
		if !slices.Contains(rec.voters, id) && !slices.Contains(rec.learners, id) {
			everyone = false
		}
	}
	wantL = slices.Clone(learners)
	if everyone {
		wantL = sortedWith(wantL, member)
	}
	return wantV, wantL
}

func sortedWith(ids []uint64, id uint64) []uint64 {
	out := append(slices.Clone(ids), id)
	slices.Sort(out)
	return slices.Compact(out)
}

func (m *Manager) allMembers(ctx context.Context) []uint64 {
	ids, err := m.cfg.Members(ctx)
	if err != nil {
		return nil
	}
	return ids
}

// awaitPlacement waits until queue k's target is done and its placement
// names member a voter (add) or not.
func (m *Manager) awaitPlacement(ctx context.Context, k meta.QueueKey, member uint64, add bool) error {
	t := time.NewTicker(membershipPoll)
	defer t.Stop()
	for {
		traw, err := m.rawRecord(targetKey(k))
		if err != nil {
			return err
		}
		if traw == nil {
			rec, err := m.read(k)
			if err != nil {
				return err
			}
			if rec == nil {
				return fmt.Errorf("%w: queue %q in vhost %q (deleted)", ErrNoGroup, k.Name, k.VHost)
			}
			if slices.Contains(rec.voters, member) == add {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("qgroup: queue %q: membership change of member %d asked, not done yet: %w", k.Name, member, ctx.Err())
		case <-m.stop:
			return multiraft.ErrClosed
		case <-t.C:
		}
	}
}

// startMembership starts the goroutine that drives the membership
// changes of the groups this member leads; Close stops it. It follows
// the metadata group's change feed, so an idle cluster costs it no
// reads: it reads the targets while one is pending, and each placement
// the feed says changed.
func (m *Manager) startMembership() {
	var mu sync.Mutex
	dirty := map[meta.QueueKey]bool{}
	all, targets := false, true // a target may be pending from before a restart
	cancel := m.cfg.Meta.Watch(func(c meta.Change) {
		switch {
		case c.Kind == meta.ChangeReset:
			mu.Lock()
			all, targets = true, true
			mu.Unlock()
		case c.Kind != meta.ChangeRecord:
		case len(c.Shard) > 1 && c.Shard[0] == recordPrefix && c.Shard[1] == kindTarget:
			mu.Lock()
			targets = true
			mu.Unlock()
		default:
			if k, ok := parseQueueRecordKey([]byte(c.Shard)); ok {
				mu.Lock()
				dirty[k] = true
				mu.Unlock()
			}
		}
	})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		t := time.NewTicker(membershipPoll)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
			mu.Lock()
			readTargets, readAll, keys := targets, all, dirty
			targets, all, dirty = false, false, map[meta.QueueKey]bool{}
			mu.Unlock()
			if readTargets {
				n, err := m.membershipStep()
				if err != nil {
					m.log.Warn("qgroup: membership", "err", err)
				}
				if n > 0 || err != nil {
					mu.Lock()
					targets = true // still pending: look again next time
					mu.Unlock()
				}
			}
			if readAll || len(keys) > 0 {
				m.refreshPlacements(keys, readAll)
			}
		}
	}()
}

// membershipStep reads the pending targets and drives those of the
// groups this member leads; it returns how many are pending.
func (m *Manager) membershipStep() (int, error) {
	type pending struct {
		k    meta.QueueKey
		raw  []byte
		v, l []uint64
	}
	var ts []pending
	err := m.cfg.Meta.ScanRecords([]byte{recordPrefix, kindTarget}, nil, func(key, v []byte) bool {
		kk := slices.Clone(key)
		kk[1] = kindQueue
		k, ok := parseQueueRecordKey(kk)
		if !ok {
			return true
		}
		voters, learners, err := decodeTarget(v)
		if err != nil {
			m.log.Warn("qgroup: skipped a membership target", "err", err)
			return true
		}
		ts = append(ts, pending{k: k, raw: slices.Clone(v), v: voters, l: learners})
		return true
	})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, p := range ts {
		if err := m.driveMembership(ctx, p.k, p.raw, p.v, p.l); err != nil {
			errs = append(errs, fmt.Errorf("queue %q in vhost %q: %w", p.k.Name, p.k.VHost, err))
		}
	}
	return len(ts), errors.Join(errs...)
}

// driveMembership moves queue k's group toward the target (wantV,
// wantL) when this member leads it, one configuration change at a time,
// and records the placement once there.
func (m *Manager) driveMembership(ctx context.Context, k meta.QueueKey, traw []byte, wantV, wantL []uint64) error {
	praw, err := m.rawRecord(queueRecordKey(k))
	if err != nil {
		return err
	}
	if praw == nil { // the queue was deleted: its target goes with it
		_, err := m.cfg.Meta.UpdateRecords(ctx, meta.RecordUpdate{
			Match: []meta.Record{{Key: targetKey(k), Value: traw}}, Delete: [][]byte{targetKey(k)}})
		return err
	}
	rec, err := decodePlacement(k, praw)
	if err != nil {
		return err
	}
	self := m.cfg.Self
	for range 8 {
		gi, err := m.groupInfo(ctx, rec.group)
		if errors.Is(err, multiraft.ErrNoGroup) {
			return nil // not here: a member that holds it drives it
		}
		if err != nil {
			return err
		}
		if gi.Leader != self {
			return nil
		}
		v, l := gi.Voters, gi.Learners
		in := func(ids []uint64, id uint64) bool { return slices.Contains(ids, id) }
		step := func() (bool, error) {
			for _, id := range wantV { // a new voter: learner first, promoted once current
				if in(v, id) {
					continue
				}
				if !in(l, id) {
					return true, m.eng.AddLearner(ctx, rec.group, id)
				}
				if in(gi.Current, id) {
					return true, m.eng.AddReplica(ctx, rec.group, id)
				}
				return false, nil // catching up: the next step looks again
			}
			for _, id := range wantL {
				if !in(v, id) && !in(l, id) {
					return true, m.eng.AddLearner(ctx, rec.group, id)
				}
			}
			for _, id := range v {
				if in(wantV, id) {
					continue
				}
				if id == self { // hand the leadership over; the next leader goes on
					for _, to := range gi.Current {
						if in(wantV, to) && in(v, to) {
							return false, m.eng.TransferLeader(ctx, rec.group, to)
						}
					}
					return false, nil
				}
				if in(wantL, id) {
					return true, m.eng.AddLearner(ctx, rec.group, id) // demoted
				}
				return true, m.eng.RemoveReplica(ctx, rec.group, id)
			}
			for _, id := range l {
				if !in(wantL, id) && !in(wantV, id) {
					return true, m.eng.RemoveReplica(ctx, rec.group, id)
				}
			}
			// The configuration is the target: record it.
			_, err := m.cfg.Meta.UpdateRecords(ctx, meta.RecordUpdate{
				Match:  []meta.Record{{Key: queueRecordKey(k), Value: praw}, {Key: targetKey(k), Value: traw}},
				Set:    []meta.Record{{Key: queueRecordKey(k), Value: encodePlacement(rec.group, wantV, wantL, rec.leader)}},
				Delete: [][]byte{targetKey(k)},
			})
			return false, err
		}
		again, err := step()
		if err != nil || !again {
			return err
		}
	}
	return nil
}

func (m *Manager) groupInfo(ctx context.Context, group uint64) (multiraft.GroupInfo, error) {
	st, err := m.eng.Status(ctx, group)
	if err != nil {
		return multiraft.GroupInfo{}, err
	}
	gi := multiraft.GroupInfo{ID: group, Leader: st.Leader, Voters: st.Voters, Learners: st.Learners}
	if !st.IsLeader {
		return gi, nil
	}
	gs, err := m.eng.GroupInfos(ctx)
	if err != nil {
		return gi, err
	}
	for _, g := range gs {
		if g.ID == group {
			return g, nil
		}
	}
	return gi, multiraft.ErrNoGroup
}

// refreshPlacements brings this member's view of the placements of keys
// (every one when all) up to the records after a membership change: a group that now names this
// member is created here, and the copy of one that no longer does (and
// whose configuration, as applied here, no longer has it) is removed,
// the queue staying known so that it is not taken for one without a
// group.
func (m *Manager) refreshPlacements(keys map[meta.QueueKey]bool, all bool) {
	var recs []*queueGroup
	if all {
		var err error
		if recs, err = m.scan(); err != nil {
			return
		}
	}
	for k := range keys {
		if all {
			break
		}
		if rec, err := m.read(k); err == nil && rec != nil {
			recs = append(recs, rec)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	self := m.cfg.Self
	for _, rec := range recs {
		m.mu.Lock()
		old := m.byKey[rec.key]
		same := old != nil && old.group == rec.group
		changed := same && (!slices.Equal(old.voters, rec.voters) || !slices.Equal(old.learners, rec.learners))
		var cur *queueGroup
		if changed {
			cur = &queueGroup{key: old.key, group: old.group, voters: rec.voters, learners: rec.learners,
				leader: old.leader, st: old.st, ready: old.ready}
			m.byKey[rec.key] = cur
			m.byGroup[rec.group] = cur
		}
		m.mu.Unlock()
		if !changed {
			continue
		}
		if slices.Contains(cur.voters, self) || slices.Contains(cur.learners, self) {
			m.ensure(cur)
			continue
		}
		if st, err := m.eng.Status(ctx, cur.group); err == nil && !slices.Contains(st.Voters, self) && !slices.Contains(st.Learners, self) {
			if err := m.eng.RemoveGroup(ctx, cur.group); err != nil && !errors.Is(err, multiraft.ErrNoGroup) {
				m.log.Warn("qgroup: remove a group this member left", "group", cur.group, "err", err)
			}
		}
	}
}

// MemberGroups is one member's share of the queue groups, as this member
// sees them.
type MemberGroups struct {
	// Voter, Learner: the groups whose configuration has the member as
	// a voter, a learner.
	Voter, Learner int
	// Leader: the groups it leads, as far as this member knows.
	Leader int
}

// MemberGroups counts, for every member that appears in a group this
// member holds, the groups it votes in, learns and leads (for /api/nodes).
func (m *Manager) MemberGroups(ctx context.Context) (map[uint64]MemberGroups, error) {
	gs, err := m.eng.GroupInfos(ctx)
	if err != nil {
		return nil, err
	}
	out := map[uint64]MemberGroups{}
	for _, g := range gs {
		for _, id := range g.Voters {
			c := out[id]
			c.Voter++
			out[id] = c
		}
		for _, id := range g.Learners {
			c := out[id]
			c.Learner++
			out[id] = c
		}
		if g.Leader != 0 {
			c := out[g.Leader]
			c.Leader++
			out[g.Leader] = c
		}
	}
	return out, nil
}

// QueueType is a declaration's x-queue-type ("" when it has none).
func QueueType(q meta.Queue) string {
	t, _, _ := queueArgs(q)
	return t
}
