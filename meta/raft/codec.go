package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

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

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
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

// cloneBytes copies b; nil and empty both become nil.
func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// Record values (the offset lives in the key):
//
//	lp(exchange) lp(routing key) lp(properties) lp(body) flags priority
//	varint(enqueued at) varint(expires at)
const recPersistent = 1

func appendRecord(dst []byte, r *storage.Record) []byte {
	dst = appendLPString(dst, r.Exchange)
	dst = appendLPString(dst, r.RoutingKey)
	dst = appendLP(dst, r.Properties)
	dst = appendLP(dst, r.Body)
	var flags byte
	if r.Persistent {
		flags |= recPersistent
	}
	dst = append(dst, flags, r.Priority)
	dst = binary.AppendVarint(dst, r.EnqueuedAt)
	return binary.AppendVarint(dst, r.ExpiresAt)
}

// decodeRecordFrom reads one record; the result copies nothing, so callers
// that keep it must copy (readRecord does).
func decodeRecordFrom(d *decoder) storage.Record {
	var r storage.Record
	r.Exchange = string(d.lp("record exchange"))
	r.RoutingKey = string(d.lp("record routing key"))
	r.Properties = d.lp("record properties")
	r.Body = d.lp("record body")
	flags := d.byte1("record flags")
	r.Persistent = flags&recPersistent != 0
	r.Priority = d.byte1("record priority")
	r.EnqueuedAt = d.varint("record enqueued-at")
	r.ExpiresAt = d.varint("record expires-at")
	return r
}

// readRecord decodes a stored record value into a record that owns its
// bytes.
func readRecord(offset uint64, v []byte) (storage.Record, error) {
	d := decoder{b: v}
	r := decodeRecordFrom(&d)
	if err := d.done("record"); err != nil {
		return storage.Record{}, err
	}
	r.Offset = offset
	r.Properties = cloneBytes(r.Properties)
	r.Body = cloneBytes(r.Body)
	return r, nil
}

// Unacked entry values (the key names vhost, queue and offset):
//
//	lp(connection) uvarint(channel) uvarint(tag) lp(broker) uvarint(incarnation)
//	varint(delivered at) uvarint(delivery count) state
func appendEntry(dst []byte, e *unacked.Entry) []byte {
	dst = appendLPString(dst, e.Connection)
	dst = binary.AppendUvarint(dst, uint64(e.Channel))
	dst = binary.AppendUvarint(dst, e.DeliveryTag)
	dst = appendLPString(dst, e.Broker)
	dst = binary.AppendUvarint(dst, e.Incarnation)
	dst = binary.AppendVarint(dst, e.DeliveredAt)
	dst = binary.AppendUvarint(dst, uint64(e.DeliveryCount))
	return append(dst, byte(e.State))
}

func readEntry(k unacked.Key, v []byte) (unacked.Entry, error) {
	d := decoder{b: v}
	e := unacked.Entry{Key: k}
	e.Connection = string(d.lp("entry connection"))
	ch := d.uvarint("entry channel")
	e.DeliveryTag = d.uvarint("entry delivery tag")
	e.Broker = string(d.lp("entry broker"))
	e.Incarnation = d.uvarint("entry incarnation")
	e.DeliveredAt = d.varint("entry delivered-at")
	count := d.uvarint("entry delivery count")
	e.State = unacked.State(d.byte1("entry state"))
	if err := d.done("unacked entry"); err != nil {
		return unacked.Entry{}, err
	}
	if ch > math.MaxUint16 || count > math.MaxUint32 {
		return unacked.Entry{}, fmt.Errorf("%w: unacked entry channel %d or count %d out of range", errCorrupt, ch, count)
	}
	e.Channel, e.DeliveryCount = uint16(ch), uint32(count)
	return e, nil
}
