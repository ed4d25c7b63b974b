package raftlink_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/raftlink"
)

func TestCheckMessage(t *testing.T) {
	u := proto.Uint64
	typ := func(t raftpb.MessageType) *raftpb.MessageType { return t.Enum() }
	msg := func(t raftpb.MessageType, term uint64) *raftpb.Message {
		return &raftpb.Message{Type: typ(t), To: u(1), From: u(2), Term: u(term)}
	}
	ents := func(idx, term []uint64) []*raftpb.Entry {
		var es []*raftpb.Entry
		for i := range idx {
			es = append(es, &raftpb.Entry{Index: u(idx[i]), Term: u(term[i])})
		}
		return es
	}
	with := func(m *raftpb.Message, f func(m *raftpb.Message)) *raftpb.Message { f(m); return m }
	snap := func(index, term uint64) *raftpb.Snapshot {
		return &raftpb.Snapshot{Data: []byte("s"), Metadata: &raftpb.SnapshotMetadata{Index: u(index), Term: u(term)}}
	}
	tests := []struct {
		name string
		m    *raftpb.Message
		ok   bool
	}{
		{"heartbeat", msg(raftpb.MsgHeartbeat, 5), true},
		{"append", with(msg(raftpb.MsgApp, 5), func(m *raftpb.Message) {
			m.Index, m.LogTerm, m.Entries, m.Commit = u(10), u(4), ents([]uint64{11, 12}, []uint64{4, 5}), u(10)
		}), true},
		{"proposal", with(msg(raftpb.MsgProp, 0), func(m *raftpb.Message) { m.Entries = []*raftpb.Entry{{Data: []byte("c")}} }), true},
		{"forwarded read", with(msg(raftpb.MsgReadIndex, 0), func(m *raftpb.Message) { m.Entries = []*raftpb.Entry{{Data: []byte("r")}} }), true},
		{"snapshot", with(msg(raftpb.MsgSnap, 5), func(m *raftpb.Message) { m.Snapshot = snap(100, 5) }), true},
		{"pre-vote", with(msg(raftpb.MsgPreVote, 6), func(m *raftpb.Message) { m.Index, m.LogTerm = u(12), u(5) }), true},
		{"an empty snapshot field on a heartbeat", with(msg(raftpb.MsgHeartbeat, 5), func(m *raftpb.Message) { m.Snapshot = &raftpb.Snapshot{} }), true},
		{"the largest term", msg(raftpb.MsgHeartbeat, raftlink.MaxTerm), true},

		{"term 2^64-1", msg(raftpb.MsgHeartbeat, math.MaxUint64), false},
		{"term past the bound", msg(raftpb.MsgPreVote, raftlink.MaxTerm+1), false},
		{"an append without a term", msg(raftpb.MsgApp, 0), false},
		{"a proposal with a term", msg(raftpb.MsgProp, 3), false},
		{"a local message", msg(raftpb.MsgHup, 0), false},
		{"a storage message", msg(raftpb.MsgStorageAppend, 5), false},
		{"an unknown type", msg(raftpb.MessageType(99), 5), false},
		{"leadership transfer", msg(raftpb.MsgTransferLeader, 5), false},
		{"to another member", with(msg(raftpb.MsgHeartbeat, 5), func(m *raftpb.Message) { m.To = u(3) }), false},
		{"from nobody", with(msg(raftpb.MsgHeartbeat, 5), func(m *raftpb.Message) { m.From = u(0) }), false},
		{"from itself", with(msg(raftpb.MsgHeartbeat, 5), func(m *raftpb.Message) { m.From = u(1) }), false},
		{"a log term past the term", with(msg(raftpb.MsgVote, 5), func(m *raftpb.Message) { m.LogTerm = u(6) }), false},
		{"a commit past the bound", with(msg(raftpb.MsgHeartbeat, 5), func(m *raftpb.Message) { m.Commit = u(math.MaxUint64) }), false},
		{"an index past the bound", with(msg(raftpb.MsgAppResp, 5), func(m *raftpb.Message) { m.Index = u(raftlink.MaxIndex + 1) }), false},
		{"entries that wrap the index", with(msg(raftpb.MsgApp, 5), func(m *raftpb.Message) {
			m.Index, m.Entries = u(raftlink.MaxIndex), ents([]uint64{0}, []uint64{5})
		}), false},
		{"entries out of order", with(msg(raftpb.MsgApp, 5), func(m *raftpb.Message) {
			m.Index, m.Entries = u(10), ents([]uint64{11, 13}, []uint64{5, 5})
		}), false},
		{"an entry's term past the message's", with(msg(raftpb.MsgApp, 5), func(m *raftpb.Message) {
			m.Index, m.Entries = u(10), ents([]uint64{11}, []uint64{6})
		}), false},
		{"entry terms going down", with(msg(raftpb.MsgApp, 5), func(m *raftpb.Message) {
			m.Index, m.LogTerm, m.Entries = u(10), u(4), ents([]uint64{11, 12}, []uint64{5, 4})
		}), false},
		{"entries on a heartbeat", with(msg(raftpb.MsgHeartbeat, 5), func(m *raftpb.Message) { m.Entries = ents([]uint64{1}, []uint64{1}) }), false},
		{"a proposal entry with an index", with(msg(raftpb.MsgProp, 0), func(m *raftpb.Message) { m.Entries = ents([]uint64{7}, []uint64{0}) }), false},
		{"a snapshot on a heartbeat", with(msg(raftpb.MsgHeartbeat, 5), func(m *raftpb.Message) { m.Snapshot = snap(100, 5) }), false},
		{"a snapshot past the term", with(msg(raftpb.MsgSnap, 5), func(m *raftpb.Message) { m.Snapshot = snap(100, 6) }), false},
		{"a snapshot without an index", with(msg(raftpb.MsgSnap, 5), func(m *raftpb.Message) { m.Snapshot = snap(0, 5) }), false},
		{"storage responses", with(msg(raftpb.MsgHeartbeat, 5), func(m *raftpb.Message) { m.Responses = []*raftpb.Message{msg(raftpb.MsgHup, 0)} }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := raftlink.CheckMessage(tt.m, 1)
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}
