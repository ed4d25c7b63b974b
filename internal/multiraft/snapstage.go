package multiraft

import (
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/raftlink"
)

// errChunk is a chunk the receiver drops: out of order, of a transfer it
// no longer holds, or past what it stages.
var errChunk = errors.New("multiraft: snapshot chunk refused")

// snapStaging reassembles the snapshot messages that arrive in chunks
// (frameChunk), owned by the loop. It holds at most one transfer per
// group: a chunk at offset 0 starts one, abandoning the group's earlier
// one (a newer snapshot replaces a stale one); every other chunk must
// come from the same member, name the same snapshot and continue where
// the transfer is, or the transfer is abandoned (raft's leader sends a
// new snapshot once it hears the replica is still behind). The totals of
// the transfers held stay within max bytes; one silent for timeout is
// abandoned.
type snapStaging struct {
	max     uint64
	timeout time.Duration
	held    uint64
	groups  map[uint64]*stagedSnap
	log     raftlink.RateLog
}

// stagedSnap is one transfer being reassembled.
type stagedSnap struct {
	from  uint64
	msg   *raftpb.Message // without data: names the transfer
	data  []byte
	total uint64
	last  time.Time
}

func newSnapStaging(max uint64, timeout time.Duration) *snapStaging {
	return &snapStaging{max: max, timeout: timeout, groups: map[uint64]*stagedSnap{}}
}

// add takes chunk c from member from at now, and returns the whole
// snapshot message once its last chunk arrived (nil before). An error
// means c was dropped (and, when it belonged to one, its transfer).
func (s *snapStaging) add(from uint64, c *snapChunk, now time.Time) (*raftpb.Message, error) {
	t := s.groups[c.group]
	if c.offset == 0 {
		if t != nil {
			s.drop(c.group)
		}
		if c.total > s.max-s.held {
			return nil, fmt.Errorf("%w: group %d: a snapshot of %d bytes, %d of %d staged", errChunk, c.group, c.total, s.held, s.max)
		}
		t = &stagedSnap{from: from, msg: c.msg, total: c.total, data: make([]byte, 0, c.total)}
		s.groups[c.group] = t
		s.held += c.total
	} else if t == nil || t.from != from || t.total != c.total || uint64(len(t.data)) != c.offset || !sameTransfer(t.msg, c.msg) {
		if t != nil {
			s.drop(c.group)
		}
		return nil, fmt.Errorf("%w: group %d: %d bytes at %d of %d out of turn", errChunk, c.group, len(c.data), c.offset, c.total)
	}
	t.data = append(t.data, c.data...)
	t.last = now
	if uint64(len(t.data)) < t.total {
		return nil, nil
	}
	s.drop(c.group)
	m := t.msg
	m.Snapshot.Data = t.data
	return m, nil
}

// sameTransfer reports whether two chunks' messages name the same
// snapshot of the same leader's term.
func sameTransfer(a, b *raftpb.Message) bool {
	return a.GetTerm() == b.GetTerm() && proto.Equal(a.GetSnapshot().GetMetadata(), b.GetSnapshot().GetMetadata())
}

func (s *snapStaging) drop(group uint64) {
	if t := s.groups[group]; t != nil {
		s.held -= t.total
		delete(s.groups, group)
	}
}

// expire abandons the transfers no chunk came for since timeout before
// now, and returns how many.
func (s *snapStaging) expire(now time.Time) int {
	n := 0
	for g, t := range s.groups {
		if now.Sub(t.last) >= s.timeout {
			s.drop(g)
			n++
		}
	}
	return n
}

// receiveChunk stages chunk c from member from, and steps the group's
// snapshot message once it is whole. A chunk of a group this member does
// not have, or one staging refuses, is dropped: raft's leader, hearing
// nothing back, sends the snapshot anew.
func (e *Engine) receiveChunk(from uint64, c *snapChunk) {
	g := e.groups[c.group]
	if g == nil {
		e.dropped.Add(1)
		return
	}
	m, err := e.staging.add(from, c, time.Now())
	if err != nil {
		e.dropped.Add(1)
		e.staging.log.Warn(e.cfg.Logger, "multiraft: dropped a snapshot chunk", "group", c.group, "from", from, "err", err)
		return
	}
	if m == nil {
		return
	}
	e.wake(g)
	_ = g.rn.Step(m)
	e.dirty[g.id] = g
}
