package qgroup

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/codec"
)

// The commands of a queue's group, one byte each, then its operands.
const (
	opAppend     byte = 1 // records
	opDelOffsets byte = 2 // offsets
	opDelShard   byte = 3
	opCAS        byte = 4 // old, new
	opPut        byte = 5 // entries
	opDelete     byte = 6 // offsets
	opClaim      byte = 7 // move, from, to, taken offsets, entries
	opDelQueue   byte = 8
)

var errCommand = errors.New("qgroup: malformed command")

// encoder builds one command.
type encoder struct{ b []byte }

func (e *encoder) u(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) bs(p []byte) { e.u(uint64(len(p))); e.b = append(e.b, p...) }

func (e *encoder) offsets(offs []uint64) {
	e.u(uint64(len(offs)))
	for _, o := range offs {
		e.u(o)
	}
}

func (e *encoder) entries(es []unacked.Entry) {
	e.u(uint64(len(es)))
	var scratch []byte
	for i := range es {
		e.u(es[i].Offset)
		scratch = codec.AppendEntry(scratch[:0], &es[i])
		e.bs(scratch)
	}
}

func appendCommand(recs []storage.Record) []byte {
	e := encoder{b: []byte{opAppend}}
	e.u(uint64(len(recs)))
	var scratch []byte
	for i := range recs {
		scratch = codec.AppendRecord(scratch[:0], &recs[i])
		e.bs(scratch)
	}
	return e.b
}

func offsetsCommand(op byte, offs []uint64) []byte {
	e := encoder{b: []byte{op}}
	e.offsets(offs)
	return e.b
}

func casCommand(old, new uint64) []byte {
	e := encoder{b: []byte{opCAS}}
	e.u(old)
	e.u(new)
	return e.b
}

func putCommand(es []unacked.Entry) []byte {
	e := encoder{b: []byte{opPut}}
	e.entries(es)
	return e.b
}

func claimCommand(c *unacked.Claim) []byte {
	e := encoder{b: []byte{opClaim}}
	move := uint64(0)
	if c.Move {
		move = 1
	}
	e.u(move)
	e.u(c.From)
	e.u(c.To)
	taken := make([]uint64, len(c.Taken))
	for i, k := range c.Taken {
		taken[i] = k.Offset
	}
	e.offsets(taken)
	e.entries(c.Entries)
	return e.b
}

// decoder reads a command's operands; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCommand
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bs() []byte {
	n := d.u()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errCommand
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

// count reads a count of items at least min bytes each, bounded by what
// is left, so a forged count cannot allocate past the command's size.
func (d *decoder) count(min int) int {
	n := d.u()
	if d.err == nil && n > uint64(len(d.b)/min) {
		d.err = errCommand
	}
	return int(n)
}

func (d *decoder) offsets() []uint64 {
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = d.u()
	}
	return out
}

func (d *decoder) entries(k unacked.Key) []unacked.Entry {
	n := d.count(2)
	if d.err != nil {
		return nil
	}
	out := make([]unacked.Entry, n)
	for i := range out {
		out[i].Key = k
		out[i].Offset = d.u()
		v := d.bs()
		if d.err == nil {
			if err := codec.DecodeEntry(v, &out[i]); err != nil {
				d.err = fmt.Errorf("%w: %w", errCommand, err)
			}
		}
	}
	return out
}

func (d *decoder) records() []storage.Record {
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	out := make([]storage.Record, n)
	for i := range out {
		v := d.bs()
		if d.err != nil {
			return nil
		}
		r, err := codec.DecodeRecord(v)
		if err != nil {
			d.err = fmt.Errorf("%w: %w", errCommand, err)
			return nil
		}
		out[i] = r
	}
	return out
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errCommand
	}
	return d.err
}
