package codec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/warrenmq/broker/unacked"
)

// EntryKeyPrefix is the first byte of every unacked entry key. The key
// layout:
//
//	'u' uvarint(len vhost) vhost uvarint(len queue) queue offset(8 bytes, big-endian)
//
// Length prefixes keep one queue's keys contiguous and apart from every
// other queue's (vhost "a" queue "bq" and vhost "ab" queue "q" differ), so
// a queue is one ordered prefix scan, and the big-endian offset sorts that
// scan by offset. A cluster member's state machine uses the same keys.
const EntryKeyPrefix = 'u'

// EntryVersion is the first byte of an unacked entry value, in layout
// version 1:
//
//	1 uvarint(len conn) conn uvarint(channel) uvarint(tag)
//	  uvarint(len broker) broker uvarint(incarnation) varint(deliveredAt)
//	  uvarint(deliveryCount) state
//
// An entry with Failed or HeldUntil set is written in version 2, which
// adds them before the state:
//
//	2 ...as version 1... uvarint(deliveryCount) uvarint(failed)
//	  varint(heldUntil) state
//
// Every other entry is still written in version 1, byte for byte as
// before, and both versions are read. The state is the last byte, so
// EntryState reads it without decoding.
const (
	EntryVersion  = 1
	entryVersion2 = 2
)

// AppendQueuePrefix appends the prefix shared by every entry key of one
// queue.
func AppendQueuePrefix(dst []byte, vhost, queue string) []byte {
	dst = append(dst, EntryKeyPrefix)
	dst = appendLP(dst, vhost)
	return appendLP(dst, queue)
}

// AppendEntryKey appends the key of the entry k.
func AppendEntryKey(dst []byte, k unacked.Key) []byte {
	dst = AppendQueuePrefix(dst, k.VHost, k.Queue)
	return binary.BigEndian.AppendUint64(dst, k.Offset)
}

// DecodeEntryKey decodes a key written by AppendEntryKey.
func DecodeEntryKey(b []byte) (unacked.Key, error) {
	if len(b) == 0 || b[0] != EntryKeyPrefix {
		return unacked.Key{}, fmt.Errorf("%w: key %q lacks the %q prefix", ErrCorrupt, b, EntryKeyPrefix)
	}
	vhost, rest, err := readLP(b[1:])
	if err != nil {
		return unacked.Key{}, fmt.Errorf("%w: key %q", err, b)
	}
	queue, rest, err := readLP(rest)
	if err != nil || len(rest) != 8 {
		return unacked.Key{}, fmt.Errorf("%w: key %q", ErrCorrupt, b)
	}
	return unacked.Key{VHost: vhost, Queue: queue, Offset: binary.BigEndian.Uint64(rest)}, nil
}

// AppendEntry appends the value of e (everything but its Key) to dst.
func AppendEntry(dst []byte, e *unacked.Entry) []byte {
	v2 := e.Failed != 0 || e.HeldUntil != 0
	if v2 {
		dst = append(dst, entryVersion2)
	} else {
		dst = append(dst, EntryVersion)
	}
	dst = appendLP(dst, e.Connection)
	dst = binary.AppendUvarint(dst, uint64(e.Channel))
	dst = binary.AppendUvarint(dst, e.DeliveryTag)
	dst = appendLP(dst, e.Broker)
	dst = binary.AppendUvarint(dst, e.Incarnation)
	dst = binary.AppendVarint(dst, e.DeliveredAt)
	dst = binary.AppendUvarint(dst, uint64(e.DeliveryCount))
	if v2 {
		dst = binary.AppendUvarint(dst, uint64(e.Failed))
		dst = binary.AppendVarint(dst, e.HeldUntil)
	}
	return append(dst, byte(e.State))
}

// DecodeEntry fills everything in e but its Key from a value written by
// AppendEntry.
func DecodeEntry(b []byte, e *unacked.Entry) error {
	if len(b) == 0 || b[0] != EntryVersion && b[0] != entryVersion2 {
		return fmt.Errorf("%w: unknown unacked entry version", ErrCorrupt)
	}
	v2 := b[0] == entryVersion2
	b = b[1:]
	var err error
	if e.Connection, b, err = readLP(b); err != nil {
		return err
	}
	ch, b, err := readUvarint(b, math.MaxUint16)
	if err != nil {
		return err
	}
	e.Channel = uint16(ch)
	if e.DeliveryTag, b, err = readUvarint(b, math.MaxUint64); err != nil {
		return err
	}
	if e.Broker, b, err = readLP(b); err != nil {
		return err
	}
	if e.Incarnation, b, err = readUvarint(b, math.MaxUint64); err != nil {
		return err
	}
	at, w := binary.Varint(b)
	if w <= 0 || w != varintLen(at) {
		return ErrCorrupt
	}
	e.DeliveredAt, b = at, b[w:]
	count, b, err := readUvarint(b, math.MaxUint32)
	if err != nil {
		return err
	}
	e.DeliveryCount = uint32(count)
	e.Failed, e.HeldUntil = 0, 0
	if v2 {
		failed, rest, err := readUvarint(b, math.MaxUint32)
		if err != nil {
			return err
		}
		held, w := binary.Varint(rest)
		if w <= 0 || w != varintLen(held) {
			return ErrCorrupt
		}
		if failed == 0 && held == 0 {
			// Written as version 1: one encoding per entry.
			return fmt.Errorf("%w: version 2 unacked entry without version 2 fields", ErrCorrupt)
		}
		e.Failed, e.HeldUntil, b = uint32(failed), held, rest[w:]
	}
	if len(b) != 1 || (unacked.State(b[0]) != unacked.Delivered && unacked.State(b[0]) != unacked.Returned) {
		return fmt.Errorf("%w: bad unacked entry state or trailing bytes", ErrCorrupt)
	}
	e.State = unacked.State(b[0])
	return nil
}

// EntryState is the state of an encoded entry, its last byte, read without
// decoding the rest; 0 for an empty value.
func EntryState(v []byte) unacked.State {
	if len(v) == 0 {
		return 0
	}
	return unacked.State(v[len(v)-1])
}
