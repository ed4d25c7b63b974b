package raft

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// errCorrupt is wrapped by every decoding error: a command or stored value
// that does not parse means a bug or a damaged disk, never bad user input.
var errCorrupt = errors.New("raft: corrupt encoding")

// appendLP appends b with a uvarint length prefix.
func appendLP(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendLPString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decoder reads what the append helpers wrote. The first error sticks, so a
// caller checks err once at the end; lengths are checked against what is
// left before anything is sliced or allocated.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: short or bad %s", errCorrupt, what)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64(what string) uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) byte1(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail(what)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// lp returns the next length-prefixed field, aliasing the input.
func (d *decoder) lp(what string) []byte {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// count reads an element count and rejects one that cannot fit in what is
// left (every element takes at least min bytes), so a corrupt count never
// drives a huge allocation.
func (d *decoder) count(what string, min int) int {
	n := d.uvarint(what)
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b))/uint64(min) {
		d.fail(what)
		return 0
	}
	return int(n)
}

func (d *decoder) done(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes after %s", errCorrupt, len(d.b), what)
	}
	return d.err
}

// Record and unacked-entry values are internal/codec's versioned
// encodings, the bytes storage/pebble writes on a single node: a cluster
// member stores a message and an entry exactly as a single node does. The
// command framing around them (command.go) stays this package's own.

// readRecord decodes a stored record value into a record at offset that
// owns its bytes.
func readRecord(offset uint64, v []byte) (storage.Record, error) {
	r, err := codec.DecodeRecord(v)
	if err != nil {
		return storage.Record{}, fmt.Errorf("%w: record at offset %d: %w", errCorrupt, offset, err)
	}
	r.Offset = offset
	return r, nil
}

// readEntry decodes a stored unacked entry value under key k.
func readEntry(k unacked.Key, v []byte) (unacked.Entry, error) {
	e := unacked.Entry{Key: k}
	if err := codec.DecodeEntry(v, &e); err != nil {
		return unacked.Entry{}, fmt.Errorf("%w: unacked entry %s/%s/%d: %w", errCorrupt, k.VHost, k.Queue, k.Offset, err)
	}
	return e, nil
}
