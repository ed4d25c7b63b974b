package raft

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Snapshots: taking one of the state machine, and restoring from one.

// maybeSnapshot snapshots the state machine every SnapshotEvery applied
// entries and drops the log before it, keeping a tail so that a follower a
// little behind still catches up from the log. It also snapshots after a
// membership change (force): raft sends a new member the latest snapshot,
// and a node refuses one whose ConfState does not list it.
func (n *Node) maybeSnapshot(force bool) error {
	if n.appliedIndex == n.snapIndex || (!force && n.appliedIndex-n.snapIndex < n.cfg.SnapshotEvery) {
		return nil
	}
	data, err := n.dumpState()
	if err != nil {
		return err
	}
	snap, err := n.mem.CreateSnapshot(n.appliedIndex, n.confState, data)
	if err != nil {
		return fmt.Errorf("raft: create snapshot: %w", err)
	}
	keep := n.cfg.SnapshotEvery / 4
	compactTo := n.snapIndex
	if n.appliedIndex > keep {
		compactTo = max(compactTo, n.appliedIndex-keep)
	}
	if err := n.log.saveSnapshot(snap, compactTo); err != nil {
		return err
	}
	n.crashPoint("snapshotted")
	if compactTo > 0 {
		if err := n.mem.Compact(compactTo); err != nil && !errors.Is(err, etcdraft.ErrCompacted) {
			return fmt.Errorf("raft: compact log: %w", err)
		}
	}
	n.snapIndex = n.appliedIndex
	return nil
}

// dumpState encodes every state key but the applied index as
// lp(key) lp(value) pairs.
func (n *Node) dumpState() ([]byte, error) {
	it, err := n.state.NewIter(nil)
	if err != nil {
		return nil, fmt.Errorf("raft: snapshot state: %w", err)
	}
	defer it.Close()
	var out []byte
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.Equal(it.Key(), keyApplied) || bytes.Equal(it.Key(), keyConfState) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("raft: snapshot state: %w", err)
		}
		out = appendLP(appendLP(out, it.Key()), v)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("raft: snapshot state: %w", err)
	}
	return out, nil
}

// restore replaces the state machine with a snapshot's.
func (n *Node) restore(snap *raftpb.Snapshot) error {
	b := n.state.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
		return stageErr(err)
	}
	d := decoder{b: snap.GetData()}
	for len(d.b) > 0 && d.err == nil {
		k, v := d.lp("snapshot key"), d.lp("snapshot value")
		if d.err == nil {
			if err := b.Set(k, v, nil); err != nil {
				return stageErr(err)
			}
		}
	}
	if d.err != nil {
		return fmt.Errorf("raft: snapshot at %d: %w", snap.GetMetadata().GetIndex(), d.err)
	}
	n.appliedIndex = snap.GetMetadata().GetIndex()
	n.snapIndex = n.appliedIndex
	n.confState = proto.Clone(snap.GetMetadata().GetConfState()).(*raftpb.ConfState)
	if n.confState == nil {
		n.confState = &raftpb.ConfState{}
	}
	if err := n.stageApplied(b); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("raft: restore snapshot: %w", err)
	}
	return nil
}
