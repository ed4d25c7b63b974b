package raft

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/meta"
)

// recordPrefix is the first byte of the broker's own records
// (meta.Records: delayed messages, deduplication caches) in the state
// machine, followed by the caller's key. They are replicated, snapshotted
// and restored like everything else; a ChangeRecord tells watchers of
// each one set.
const recordPrefix = 'r'

var _ meta.Records = (*Node)(nil)

func recordStateKey(k []byte) []byte { return append([]byte{recordPrefix}, k...) }

// UpdateRecords applies u as one command, decided at apply time in log
// order on every node (opRecords): of two racing updates whose conditions
// exclude each other exactly one applies, on every node. It returns once
// the command is committed by a quorum and applied here.
func (n *Node) UpdateRecords(ctx context.Context, u meta.RecordUpdate) (bool, error) {
	var c cmd
	c.records(&u)
	r, err := n.submit(ctx, &c)
	return r.ok, err
}

// ScanRecords reads this node's replica, without a ReadIndex round (see
// meta.Records).
func (n *Node) ScanRecords(prefix, start []byte, fn func(k, v []byte) bool) error {
	n.gate.RLock()
	defer n.gate.RUnlock()
	if n.gate.closed {
		return n.stoppedErr()
	}
	lower := recordStateKey(prefix)
	if s := recordStateKey(start); bytes.Compare(s, lower) > 0 {
		lower = s
	}
	p := recordStateKey(prefix)
	it, err := n.state.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: codec.Successor(p)})
	if err != nil {
		return fmt.Errorf("raft: scan records: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("raft: scan records: %w", err)
		}
		if !fn(it.Key()[1:], v) {
			break
		}
	}
	return it.Error()
}

// records appends opRecords:
//
//	uvarint(n) lp(key)...                         present
//	uvarint(n) (lp(key) flag(1) [lp(value)])...   match: flag 0 absent, 1 value
//	uvarint(n) (lp(key) lp(value))...             set
//	uvarint(n) lp(key)...                         delete
//	uvarint(n) (lp(key) delta(8))...              add
//
// keys without the 'r' prefix, which applying adds.
func (c *cmd) records(u *meta.RecordUpdate) {
	c.ops = append(c.ops, opRecords)
	c.ops = binary.AppendUvarint(c.ops, uint64(len(u.Present)))
	for _, k := range u.Present {
		c.ops = appendLP(c.ops, k)
	}
	c.ops = binary.AppendUvarint(c.ops, uint64(len(u.Match)))
	for _, m := range u.Match {
		c.ops = appendLP(c.ops, m.Key)
		if m.Value == nil {
			c.ops = append(c.ops, 0)
		} else {
			c.ops = appendLP(append(c.ops, 1), m.Value)
		}
	}
	c.ops = binary.AppendUvarint(c.ops, uint64(len(u.Set)))
	for _, s := range u.Set {
		c.ops = appendLP(appendLP(c.ops, s.Key), s.Value)
	}
	c.ops = binary.AppendUvarint(c.ops, uint64(len(u.Delete)))
	for _, k := range u.Delete {
		c.ops = appendLP(c.ops, k)
	}
	c.ops = binary.AppendUvarint(c.ops, uint64(len(u.Add)))
	for _, a := range u.Add {
		c.ops = binary.BigEndian.AppendUint64(appendLP(c.ops, a.Key), uint64(a.Delta))
	}
	c.n++
}

// runRecords decodes one opRecords and, when b is not nil, applies it:
// nothing is written and it reports false unless every present key exists
// and every match holds, reading through the batch.
func runRecords(b *pebble.Batch, d *decoder, cs *changeSet) (bool, error) {
	nPresent := d.count("records present count", 1)
	present := *d
	for range nPresent {
		d.lp("records present key")
	}
	nMatch := d.count("records match count", 2)
	match := *d
	for range nMatch {
		d.lp("records match key")
		if f := d.byte1("records match flag"); f == 1 {
			d.lp("records match value")
		} else if f != 0 && d.err == nil {
			d.err = fmt.Errorf("%w: records match flag %d", errCorrupt, f)
		}
	}
	nSet := d.count("records set count", 2)
	set := *d
	for range nSet {
		d.lp("records set key")
		d.lp("records set value")
	}
	nDel := d.count("records delete count", 1)
	del := *d
	for range nDel {
		d.lp("records delete key")
	}
	nAdd := d.count("records add count", 9)
	add := *d
	for range nAdd {
		d.lp("records add key")
		d.u64("records add delta")
	}
	if b == nil || d.err != nil {
		return false, nil
	}
	for range nPresent {
		ok, err := has(b, recordStateKey(present.lp("records present key")))
		if err != nil || !ok {
			return false, err
		}
	}
	for range nMatch {
		k := recordStateKey(match.lp("records match key"))
		var want []byte
		if match.byte1("records match flag") == 1 {
			want = match.lp("records match value")
		}
		ok, err := valueIs(b, k, want)
		if err != nil || !ok {
			return false, err
		}
	}
	for range nSet {
		k, v := recordStateKey(set.lp("records set key")), set.lp("records set value")
		if err := cs.keyWritten(b, k, v, false); err != nil {
			return false, err
		}
		if err := b.Set(k, v, nil); err != nil {
			return false, stageErr(err)
		}
	}
	for range nDel {
		if err := b.Delete(recordStateKey(del.lp("records delete key")), nil); err != nil {
			return false, stageErr(err)
		}
	}
	for range nAdd {
		k, delta := recordStateKey(add.lp("records add key")), int64(add.u64("records add delta"))
		cur, err := getU64(b, k)
		if err != nil {
			return false, err
		}
		if v := int64(cur) + delta; v == 0 {
			err = b.Delete(k, nil)
		} else {
			err = b.Set(k, binary.BigEndian.AppendUint64(nil, uint64(v)), nil)
		}
		if err != nil {
			return false, stageErr(err)
		}
	}
	return true, nil
}

// valueIs reports whether the value under k, read through the batch, is
// want (nil: k is missing).
func valueIs(b *pebble.Batch, k, want []byte) (bool, error) {
	v, closer, err := b.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return want == nil, nil
	}
	if err != nil {
		return false, fmt.Errorf("raft: read state: %w", err)
	}
	defer closer.Close()
	return want != nil && bytes.Equal(v, want), nil
}
