package raftlink

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// The largest term and index a message or a member's log may carry. etcd
// raft adds to terms and indexes without checking for overflow: a message
// with term 2^64-1 makes the next campaign's term 0, on which raft panics,
// and the term is persisted, so the member panics again at every restart.
// No cluster gets near these bounds (2^48 elections at one a millisecond
// take 8,900 years; 2^62 entries at ten million a second, 14,000 years), so
// anything past them is forged or corrupt.
//
// MaxTerm and MaxIndex are those bounds.
const (
	MaxTerm  = 1 << 48
	MaxIndex = 1 << 62
)

// peerTypes are the message types members send each other. The rest are
// raft's local messages (ticks, storage threads, status reports), which no
// peer may inject, and MsgTransferLeader, which a follower forwards in the
// transferee's name: Warren's engines let only a group's leader transfer
// its leadership (on itself, never by a message), so no member sends one,
// and every message a member sends is from that member.
var peerTypes = map[raftpb.MessageType]bool{
	raftpb.MsgProp: true, raftpb.MsgApp: true, raftpb.MsgAppResp: true,
	raftpb.MsgVote: true, raftpb.MsgVoteResp: true, raftpb.MsgPreVote: true, raftpb.MsgPreVoteResp: true,
	raftpb.MsgSnap: true, raftpb.MsgHeartbeat: true, raftpb.MsgHeartbeatResp: true,
	raftpb.MsgTimeoutNow: true, raftpb.MsgReadIndex: true, raftpb.MsgReadIndexResp: true,
}

// CheckMessage reports why m, received from the network, must not reach
// raft's Step, or nil. It checks what raft itself trusts: the type is one
// peers send, the message is addressed to self from another member, terms
// and indexes are within bounds and consistent (a proposal or a forwarded
// read carries no term, every other message one; an append's entries
// follow its index with terms that never decrease nor pass the message's),
// and local-only fields are empty.
func CheckMessage(m *raftpb.Message, self uint64) error {
	t := m.GetType()
	switch {
	case !peerTypes[t]:
		return fmt.Errorf("type %v is not sent by peers", t)
	case m.GetTo() != self:
		return fmt.Errorf("addressed to %d", m.GetTo())
	case m.GetFrom() == 0 || m.GetFrom() == self:
		return fmt.Errorf("from %d", m.GetFrom())
	case len(m.GetResponses()) > 0:
		return errors.New("carries storage responses")
	}
	term := m.GetTerm()
	if local := t == raftpb.MsgProp || t == raftpb.MsgReadIndex; local != (term == 0) {
		return fmt.Errorf("%v with term %d", t, term)
	}
	switch {
	case term > MaxTerm || m.GetLogTerm() > term:
		return fmt.Errorf("term %d, log term %d", term, m.GetLogTerm())
	case m.GetIndex() > MaxIndex || m.GetCommit() > MaxIndex || m.GetRejectHint() > MaxIndex:
		return fmt.Errorf("index %d, commit %d, hint %d", m.GetIndex(), m.GetCommit(), m.GetRejectHint())
	}
	ents := m.GetEntries()
	switch t {
	case raftpb.MsgApp:
		if uint64(len(ents)) > MaxIndex-m.GetIndex() {
			return fmt.Errorf("%d entries after index %d", len(ents), m.GetIndex())
		}
		prev := m.GetLogTerm()
		for i, e := range ents {
			if e.GetIndex() != m.GetIndex()+1+uint64(i) || e.GetTerm() < prev || e.GetTerm() > term {
				return fmt.Errorf("entry %d at index %d, term %d, after index %d, term %d", i, e.GetIndex(), e.GetTerm(), m.GetIndex(), prev)
			}
			prev = e.GetTerm()
		}
	case raftpb.MsgProp, raftpb.MsgReadIndex, raftpb.MsgReadIndexResp:
		for _, e := range ents {
			if e.GetIndex() != 0 || e.GetTerm() != 0 {
				return fmt.Errorf("%v entry at index %d, term %d", t, e.GetIndex(), e.GetTerm())
			}
		}
	default:
		if len(ents) > 0 {
			return fmt.Errorf("%v with entries", t)
		}
	}
	if s := m.GetSnapshot(); s != nil && (t != raftpb.MsgSnap && !isEmptySnapshot(s) ||
		s.GetMetadata().GetTerm() > term || s.GetMetadata().GetIndex() > MaxIndex) {
		return fmt.Errorf("%v with a snapshot at index %d, term %d", t, s.GetMetadata().GetIndex(), s.GetMetadata().GetTerm())
	}
	if t == raftpb.MsgSnap && m.GetSnapshot().GetMetadata().GetIndex() == 0 {
		return errors.New("snapshot without an index")
	}
	return nil
}

// isEmptySnapshot is an empty snapshot field, which peers of older etcd
// raft versions may send on any message.
func isEmptySnapshot(s *raftpb.Snapshot) bool {
	return len(s.GetData()) == 0 && s.GetMetadata().GetIndex() == 0 && s.GetMetadata().GetTerm() == 0
}

// A RateLog logs a kind of refusal at most once an interval, with how many
// it did not log in between: a flood of bad connections or messages must
// not become a flood of log lines.
type RateLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// RateLogEvery is the interval of a RateLog.
const RateLogEvery = 10 * time.Second

// Warn logs msg with args on l (nil: nowhere) unless the last line was
// logged less than RateLogEvery ago; then it only counts it.
func (r *RateLog) Warn(l *slog.Logger, msg string, args ...any) {
	if l == nil {
		return
	}
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < RateLogEvery {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "not_logged_since_last", n)
	}
	l.Warn(msg, args...)
}
