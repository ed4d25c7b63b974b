package raft

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/warrenmq/broker/internal/raftlink"
)

// The bounds of terms and indexes are raftlink's (MaxTerm, MaxIndex): a
// message past them is refused by raftlink.CheckMessage before raft's
// Step, and raft state past them by checkStored at Start.
const (
	maxTerm  = raftlink.MaxTerm
	maxIndex = raftlink.MaxIndex
)

// ErrTermOutOfRange is returned by Start for a data directory whose raft
// state holds a term or index past any real cluster's (maxTerm, maxIndex):
// the mark a forged message left on a member of a version that did not
// check them. Nothing is changed. Such a member cannot vote or lead
// safely again: raft's safety rests on each member remembering the
// highest term it took part in, and that is lost. Start it on an empty
// directory (with Config.Join, after RemoveNode and AddNode on a healthy
// member) to have it catch up from the others.
var ErrTermOutOfRange = errors.New("raft: term or index beyond any real cluster's")

// checkStored refuses, at Start, raft state that carries a term or an
// index no real cluster has: raft would panic on it (a wrapped term) at
// its first campaign, and again after every restart.
func checkStored(dir string, hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	bad := func(what string, v, bound uint64) error {
		return fmt.Errorf("%w: the raft state in %s holds %s %d (at most %d is real): a forged message from outside the cluster set it "+
			"(a member of a version that did not check terms); start this member on an empty directory and let it catch up from the others",
			ErrTermOutOfRange, dir, what, v, bound)
	}
	if t := hs.GetTerm(); t > maxTerm {
		return bad("term", t, maxTerm)
	}
	if c := hs.GetCommit(); c > maxIndex {
		return bad("commit index", c, maxIndex)
	}
	if md := snap.GetMetadata(); md.GetTerm() > maxTerm || md.GetIndex() > maxIndex {
		return bad("a snapshot at term", md.GetTerm(), maxTerm)
	}
	if k := len(ents); k > 0 {
		if e := ents[k-1]; e.GetTerm() > maxTerm || e.GetIndex() > maxIndex {
			return bad("an entry of term", e.GetTerm(), maxTerm)
		}
	}
	return nil
}
