package raft

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/meta/internal/metakey"
)

// entryVersion is the first byte of a raft entry's data, which is a batch
// of commands gathered by the proposer:
//
//	version(1) uvarint(count) command...
//
// and a command is one caller's request, applied all or nothing:
//
//	reqID(8) uvarint(op count) op...
//
// Ops are low level (set a key, compare-and-swap a cursor, append records)
// so that everything above them — key layout, JSON of topology — is decided
// by the proposing node and applying stays trivially deterministic: it
// depends only on the entry and the state before it.
const entryVersion = 1

const (
	opSet        = 1 // lp(key) lp(value)
	opDel        = 2 // lp(key)
	opDelRange   = 3 // lp(start) lp(end)
	opCAS        = 4 // lp(key) old(8) new(8); result: swapped
	opAppend     = 5 // lp(shard) uvarint(n) lp(record)...; result: first offset
	opDelOffsets = 6 // lp(shard) uvarint(n) uvarint(offset)...
	opDelShard   = 7 // lp(shard)
	// opClaim is unacked.Claim: lp(cursor key) flags(1) from(8) to(8)
	// uvarint(n) lp(taken key)... uvarint(m) (lp(entry key) lp(entry))...;
	// result: ok. Its checks and writes are one op so that they apply
	// together: nothing is written unless every check holds.
	opClaim = 8
	// opRecords is meta.RecordUpdate (records.go): its conditions and
	// writes are one op, applied all or nothing; result: ok.
	opRecords     = 9
	minOpSize     = 2
	commandHeader = 8
)

// cmd builds one command's ops.
type cmd struct {
	ops []byte
	n   int
}

func (c *cmd) set(key, value []byte) {
	c.ops = appendLP(appendLP(append(c.ops, opSet), key), value)
	c.n++
}

func (c *cmd) del(key []byte) {
	c.ops = appendLP(append(c.ops, opDel), key)
	c.n++
}

func (c *cmd) delRange(start, end []byte) {
	c.ops = appendLP(appendLP(append(c.ops, opDelRange), start), end)
	c.n++
}

func (c *cmd) cas(key []byte, old, new uint64) {
	c.ops = appendLP(append(c.ops, opCAS), key)
	c.ops = binary.BigEndian.AppendUint64(c.ops, old)
	c.ops = binary.BigEndian.AppendUint64(c.ops, new)
	c.n++
}

func (c *cmd) append(shard string, recs []storage.Record) {
	c.ops = appendLPString(append(c.ops, opAppend), shard)
	c.ops = binary.AppendUvarint(c.ops, uint64(len(recs)))
	var scratch []byte
	for i := range recs {
		scratch = codec.AppendRecord(scratch[:0], &recs[i])
		c.ops = appendLP(c.ops, scratch)
	}
	c.n++
}

func (c *cmd) delOffsets(shard string, offsets []uint64) {
	c.ops = appendLPString(append(c.ops, opDelOffsets), shard)
	c.ops = binary.AppendUvarint(c.ops, uint64(len(offsets)))
	for _, o := range offsets {
		c.ops = binary.AppendUvarint(c.ops, o)
	}
	c.n++
}

func (c *cmd) delShard(shard string) {
	c.ops = appendLPString(append(c.ops, opDelShard), shard)
	c.n++
}

// claimMove is opClaim's flag for Claim.Move; no other bit is defined.
const claimMove = 1

func (c *cmd) claim(cl *unacked.Claim) {
	c.ops = appendLP(append(c.ops, opClaim), metakey.Cursor(cl.VHost, cl.Queue))
	var flags byte
	if cl.Move {
		flags |= claimMove
	}
	c.ops = append(c.ops, flags)
	c.ops = binary.BigEndian.AppendUint64(c.ops, cl.From)
	c.ops = binary.BigEndian.AppendUint64(c.ops, cl.To)
	c.ops = binary.AppendUvarint(c.ops, uint64(len(cl.Taken)))
	for _, k := range cl.Taken {
		c.ops = appendLP(c.ops, unackedKey(k))
	}
	c.ops = binary.AppendUvarint(c.ops, uint64(len(cl.Entries)))
	var scratch []byte
	for i := range cl.Entries {
		scratch = codec.AppendEntry(scratch[:0], &cl.Entries[i])
		c.ops = appendLP(appendLP(c.ops, unackedKey(cl.Entries[i].Key)), scratch)
	}
	c.n++
}

// appendCommand appends the command with request id id to an entry body.
func appendCommand(dst []byte, id uint64, c *cmd) []byte {
	dst = binary.BigEndian.AppendUint64(dst, id)
	dst = binary.AppendUvarint(dst, uint64(c.n))
	return append(dst, c.ops...)
}

// result is what applying a command returns to its proposer.
type result struct {
	val uint64 // first offset of an append
	ok  bool   // a compare-and-swap swapped
	err error
}

// applyEntry applies every command of one entry to b (an indexed batch, so
// later commands read what earlier ones wrote) and calls done with each
// command's request id and result. Each command is decoded twice: a dry run
// first, so one that does not parse is rejected whole rather than half
// applied. A decoding error ends the entry (the rest cannot be framed);
// every node hits it the same way. A read error from Pebble is returned:
// the state can no longer be trusted and the node stops. When cs is not nil
// (someone watches) the changes of every applied command are added to it.
func applyEntry(b *pebble.Batch, data []byte, cs *changeSet, done func(id uint64, r result)) error {
	d := decoder{b: data}
	if v := d.byte1("entry version"); d.err == nil && v != entryVersion {
		return fmt.Errorf("%w: entry version %d, want %d", errCorrupt, v, entryVersion)
	}
	n := d.count("command count", commandHeader+1)
	if d.err != nil {
		return d.err
	}
	for range n {
		id := d.u64("request id")
		nops := d.count("op count", minOpSize)
		if d.err != nil {
			return d.err
		}
		dry := d
		if _, err := runOps(nil, &dry, nops, nil); dry.err != nil || err != nil {
			done(id, result{err: dry.err})
			return dry.err
		}
		r, err := runOps(b, &d, nops, cs)
		if err != nil {
			return err
		}
		done(id, r)
	}
	return d.done("entry")
}

// runOps decodes nops ops and, when b is not nil, applies them to b and
// records their changes in cs (when not nil). With a nil b it only checks
// that they decode.
func runOps(b *pebble.Batch, d *decoder, nops int, cs *changeSet) (result, error) {
	var r result
	for range nops {
		op := d.byte1("op")
		switch op {
		case opSet:
			k, v := d.lp("set key"), d.lp("set value")
			if b != nil {
				if err := cs.keyWritten(b, k, v, false); err != nil {
					return r, err
				}
				if err := b.Set(k, v, nil); err != nil {
					return r, stageErr(err)
				}
			}
		case opDel:
			k := d.lp("del key")
			if b != nil {
				if err := cs.keyWritten(b, k, nil, true); err != nil {
					return r, err
				}
				if err := b.Delete(k, nil); err != nil {
					return r, stageErr(err)
				}
			}
		case opDelRange:
			start, end := d.lp("range start"), d.lp("range end")
			if b != nil {
				if err := b.DeleteRange(start, end, nil); err != nil {
					return r, stageErr(err)
				}
			}
		case opCAS:
			k := d.lp("cas key")
			old, new := d.u64("cas old"), d.u64("cas new")
			if b == nil || d.err != nil {
				break
			}
			cur, err := getU64(b, k)
			if err != nil {
				return r, err
			}
			r.ok = cur == old
			if r.ok {
				if err := setU64(b, k, new); err != nil {
					return r, err
				}
				cs.cursorMoved(k, new)
			}
		case opAppend:
			shard := d.lp("append shard")
			n := d.count("append count", 1)
			if d.err != nil {
				break
			}
			if b == nil {
				for range n {
					d.lp("append record")
				}
				break
			}
			nextKey, countKey := shardNextKey(string(shard)), shardCountKey(string(shard))
			next, err := getU64(b, nextKey)
			if err != nil {
				return r, err
			}
			count, err := getU64(b, countKey)
			if err != nil {
				return r, err
			}
			r.val = next
			prefix := shardRecPrefix(string(shard))
			key := make([]byte, 0, len(prefix)+8)
			for i := range n {
				key = binary.BigEndian.AppendUint64(append(key[:0], prefix...), next+uint64(i))
				if err := b.Set(key, d.lp("append record"), nil); err != nil {
					return r, stageErr(err)
				}
			}
			if err := setU64(b, nextKey, next+uint64(n)); err != nil {
				return r, err
			}
			if err := setU64(b, countKey, count+uint64(n)); err != nil {
				return r, err
			}
			cs.appended(shard, next+uint64(n))
		case opDelOffsets:
			shard := d.lp("delete shard")
			n := d.count("delete count", 1)
			if d.err != nil {
				break
			}
			if b == nil {
				for range n {
					d.uvarint("delete offset")
				}
				break
			}
			countKey := shardCountKey(string(shard))
			count, err := getU64(b, countKey)
			if err != nil {
				return r, err
			}
			prefix := shardRecPrefix(string(shard))
			deleted := uint64(0)
			for range n {
				k := recordKey(prefix, d.uvarint("delete offset"))
				ok, err := has(b, k)
				if err != nil {
					return r, err
				}
				if ok {
					if err := b.Delete(k, nil); err != nil {
						return r, stageErr(err)
					}
					deleted++
				}
			}
			if deleted > 0 {
				if err := setU64(b, countKey, count-deleted); err != nil {
					return r, err
				}
			}
		case opDelShard:
			p := shardPrefix(string(d.lp("shard")))
			if b != nil {
				if err := b.DeleteRange(p, codec.Successor(p), nil); err != nil {
					return r, stageErr(err)
				}
			}
		case opClaim:
			ok, err := runClaim(b, d, cs)
			if err != nil {
				return r, err
			}
			r.ok = ok
		case opRecords:
			ok, err := runRecords(b, d, cs)
			if err != nil {
				return r, err
			}
			r.ok = ok
		default:
			if d.err == nil {
				d.err = fmt.Errorf("%w: unknown op %d", errCorrupt, op)
			}
		}
		if d.err != nil {
			return r, nil
		}
	}
	return r, nil
}

// runClaim decodes one opClaim and, when b is not nil, applies it: it
// reports false and writes nothing unless (with the move flag) the cursor
// is at from and every taken key is an entry in state Returned; otherwise
// it writes the entries and (with the move flag) sets the cursor to to.
// An unset cursor reads as 0, as Offset returns it.
func runClaim(b *pebble.Batch, d *decoder, cs *changeSet) (bool, error) {
	cursor := d.lp("claim cursor")
	flags := d.byte1("claim flags")
	from, to := d.u64("claim from"), d.u64("claim to")
	if d.err == nil && flags&^claimMove != 0 {
		d.err = fmt.Errorf("%w: claim flags %#x", errCorrupt, flags)
	}
	nTaken := d.count("claim taken count", 1)
	taken := *d // the taken keys, read again below
	for range nTaken {
		d.lp("claim taken key")
	}
	nEntries := d.count("claim entry count", 2)
	entries := *d
	for range nEntries {
		d.lp("claim entry key")
		d.lp("claim entry")
	}
	if b == nil || d.err != nil {
		return false, nil
	}
	move := flags&claimMove != 0
	if move {
		cur, err := getU64(b, cursor)
		if err != nil || cur != from {
			return false, err
		}
	}
	for range nTaken {
		ok, err := isReturned(b, taken.lp("claim taken key"))
		if err != nil || !ok {
			return false, err
		}
	}
	for range nEntries {
		k, v := entries.lp("claim entry key"), entries.lp("claim entry")
		if err := cs.keyWritten(b, k, v, false); err != nil {
			return false, err
		}
		if err := b.Set(k, v, nil); err != nil {
			return false, stageErr(err)
		}
	}
	if move {
		if err := setU64(b, cursor, to); err != nil {
			return false, err
		}
		cs.cursorMoved(cursor, to)
	}
	return true, nil
}

// isReturned reports whether the unacked entry under k exists, reading
// through the batch, and is in state Returned. It looks only at the state,
// the value's last byte (see codec.EntryState), so checking a claim or telling a
// watcher costs no decoding; every node stores the same bytes, so every
// node decides alike.
func isReturned(r pebble.Reader, k []byte) (bool, error) {
	v, closer, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("raft: read state: %w", err)
	}
	defer closer.Close()
	return codec.EntryState(v) == unacked.Returned, nil
}

func stageErr(err error) error { return fmt.Errorf("raft: stage state write: %w", err) }

// has reports whether k exists, reading through the batch.
func has(b *pebble.Batch, k []byte) (bool, error) {
	_, closer, err := b.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("raft: read state: %w", err)
	}
	closer.Close()
	return true, nil
}

// getU64 reads an 8-byte counter through the batch; missing reads as 0.
func getU64(r pebble.Reader, k []byte) (uint64, error) {
	v, closer, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("raft: read state: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: counter %q has %d bytes", errCorrupt, k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func setU64(b *pebble.Batch, k []byte, v uint64) error {
	if err := b.Set(k, binary.BigEndian.AppendUint64(nil, v), nil); err != nil {
		return stageErr(err)
	}
	return nil
}
