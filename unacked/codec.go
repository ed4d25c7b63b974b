package unacked

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Key layout under the shared Pebble DB's 'u' prefix:
//
//	'u' uvarint(len vhost) vhost uvarint(len queue) queue offset(8 bytes, big-endian)
//
// Length prefixes keep one queue's keys contiguous and apart from every
// other queue's (vhost "a" queue "bq" and vhost "ab" queue "q" differ), so
// a queue is one ordered prefix scan, and the big-endian offset sorts that
// scan by offset.
const keyPrefix = 'u'

// Value layout, version byte first so the encoding can change later:
//
//	1 uvarint(len conn) conn uvarint(channel) uvarint(tag)
//	  uvarint(len broker) broker uvarint(incarnation) varint(deliveredAt)
//	  uvarint(deliveryCount) state
const valueVersion = 1

var errCorrupt = errors.New("unacked: corrupt index record")

func appendLP(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendQueuePrefix appends the prefix shared by every key of one queue.
func appendQueuePrefix(dst []byte, vhost, queue string) []byte {
	dst = append(dst, keyPrefix)
	dst = appendLP(dst, vhost)
	return appendLP(dst, queue)
}

func appendKey(dst []byte, k Key) []byte {
	dst = appendQueuePrefix(dst, k.VHost, k.Queue)
	return binary.BigEndian.AppendUint64(dst, k.Offset)
}

// readLP reads a length-prefixed string, checking the length against what
// is left before slicing.
func readLP(b []byte) (string, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || w != uvarintLen(n) || n > uint64(len(b)-w) {
		return "", nil, errCorrupt
	}
	return string(b[w : w+int(n)]), b[w+int(n):], nil
}

func decodeKey(b []byte) (Key, error) {
	if len(b) == 0 || b[0] != keyPrefix {
		return Key{}, fmt.Errorf("%w: key %q lacks the %q prefix", errCorrupt, b, keyPrefix)
	}
	vhost, rest, err := readLP(b[1:])
	if err != nil {
		return Key{}, fmt.Errorf("%w: key %q", err, b)
	}
	queue, rest, err := readLP(rest)
	if err != nil || len(rest) != 8 {
		return Key{}, fmt.Errorf("%w: key %q", errCorrupt, b)
	}
	return Key{VHost: vhost, Queue: queue, Offset: binary.BigEndian.Uint64(rest)}, nil
}

func appendValue(dst []byte, e *Entry) []byte {
	dst = append(dst, valueVersion)
	dst = appendLP(dst, e.Connection)
	dst = binary.AppendUvarint(dst, uint64(e.Channel))
	dst = binary.AppendUvarint(dst, e.DeliveryTag)
	dst = appendLP(dst, e.Broker)
	dst = binary.AppendUvarint(dst, e.Incarnation)
	dst = binary.AppendVarint(dst, e.DeliveredAt)
	dst = binary.AppendUvarint(dst, uint64(e.DeliveryCount))
	return append(dst, byte(e.State))
}

// decodeValue fills everything in e but its Key. It never panics: every
// length is checked against the input first.
func decodeValue(b []byte, e *Entry) error {
	if len(b) == 0 || b[0] != valueVersion {
		return fmt.Errorf("%w: unknown value version", errCorrupt)
	}
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
	if w <= 0 || w != uvarintLen(zigzag(at)) {
		return errCorrupt
	}
	e.DeliveredAt, b = at, b[w:]
	count, b, err := readUvarint(b, math.MaxUint32)
	if err != nil {
		return err
	}
	e.DeliveryCount = uint32(count)
	if len(b) != 1 || (State(b[0]) != Delivered && State(b[0]) != Returned) {
		return fmt.Errorf("%w: bad state or trailing bytes", errCorrupt)
	}
	e.State = State(b[0])
	return nil
}

func readUvarint(b []byte, max uint64) (uint64, []byte, error) {
	v, w := binary.Uvarint(b)
	if w <= 0 || w != uvarintLen(v) || v > max {
		return 0, nil, errCorrupt
	}
	return v, b[w:], nil
}

// uvarintLen is the length of v's shortest uvarint encoding. The decoders
// reject longer ones (binary.Uvarint accepts them) so that every record has
// exactly one encoding: a key read back always names the same entry.
func uvarintLen(v uint64) int { return max(1, (bits.Len64(v)+6)/7) }

// zigzag maps a varint's value to the uvarint binary.AppendVarint writes.
func zigzag(x int64) uint64 { return uint64(x<<1) ^ uint64(x>>63) }
