package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/warrenmq/broker/storage"
)

// ErrCorrupt is returned (wrapped) when a stored record or shard state does
// not decode: the database was damaged or written by something else. Check
// it with errors.Is.
var ErrCorrupt = errors.New("storage/pebble: corrupt data")

// Key layout. Everything this package writes starts with keyPrefix, so the
// Pebble DB can be shared with meta/local and the unacked index, which use
// other first bytes.
//
//	record:      's' uvarint(len(shard)) shard 'r' offset(8 bytes, big-endian)
//	shard state: 's' uvarint(len(shard)) shard 'm'
//
// The length prefix makes shard prefixes prefix-free (uvarint encodings
// are), so no shard's keys fall inside another's range however the names
// compare; big-endian offsets make key order offset order.
const (
	keyPrefix  = 's'
	kindRecord = 'r'
	kindState  = 'm'
	offsetLen  = 8
)

// shardPrefix returns 's' uvarint(len(name)) name.
func shardPrefix(name string) []byte {
	p := make([]byte, 0, 1+binary.MaxVarintLen64+len(name))
	p = append(p, keyPrefix)
	p = binary.AppendUvarint(p, uint64(len(name)))
	return append(p, name...)
}

// appendRecordKey appends the key of offset off in the shard with prefix.
func appendRecordKey(dst, prefix []byte, off uint64) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, kindRecord)
	return binary.BigEndian.AppendUint64(dst, off)
}

// recordKeyLen is the length of every record key of the shard with prefix.
func recordKeyLen(prefix []byte) int { return len(prefix) + 1 + offsetLen }

// Record value layout, version 1:
//
//	[0]      version (1)
//	[1]      flags: bit 0 Persistent, bit 1 Properties non-nil, bit 2 Body non-nil
//	[2]      Priority
//	[3:11]   EnqueuedAt, big-endian (Unix nanoseconds take 9 bytes as a varint)
//	varint   ExpiresAt, zig-zag (one byte for the common 0, "never")
//	uvarint  len(Exchange), Exchange
//	uvarint  len(RoutingKey), RoutingKey
//	uvarint  len(Properties), Properties
//	         Body: the rest of the value
//
// The offset is not stored: it is in the key. The nil flags exist so that a
// record reads back exactly as it was appended, nil or empty alike.
const (
	recordVersion = 1

	flagPersistent = 1 << 0
	flagProperties = 1 << 1
	flagBody       = 1 << 2
	knownFlags     = flagPersistent | flagProperties | flagBody

	recordHeaderLen = 3 + 8
)

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	// Zig-zag, as binary.AppendVarint does.
	return uvarintLen(uint64(x<<1) ^ uint64(x>>63))
}

// encodedLen returns len(appendRecord(nil, r)).
func encodedLen(r *storage.Record) int {
	return recordHeaderLen + varintLen(r.ExpiresAt) +
		uvarintLen(uint64(len(r.Exchange))) + len(r.Exchange) +
		uvarintLen(uint64(len(r.RoutingKey))) + len(r.RoutingKey) +
		uvarintLen(uint64(len(r.Properties))) + len(r.Properties) +
		len(r.Body)
}

// appendRecord appends the encoding of r, without its offset, to dst.
func appendRecord(dst []byte, r *storage.Record) []byte {
	var flags byte
	if r.Persistent {
		flags |= flagPersistent
	}
	if r.Properties != nil {
		flags |= flagProperties
	}
	if r.Body != nil {
		flags |= flagBody
	}
	dst = append(dst, recordVersion, flags, r.Priority)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.EnqueuedAt))
	dst = binary.AppendVarint(dst, r.ExpiresAt)
	dst = binary.AppendUvarint(dst, uint64(len(r.Exchange)))
	dst = append(dst, r.Exchange...)
	dst = binary.AppendUvarint(dst, uint64(len(r.RoutingKey)))
	dst = append(dst, r.RoutingKey...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Properties)))
	dst = append(dst, r.Properties...)
	return append(dst, r.Body...)
}

// decodeRecord decodes a value written by appendRecord. The record owns its
// memory: val may be reused once decodeRecord returns. Its strings and
// slices share one allocation.
func decodeRecord(val []byte) (storage.Record, error) {
	var r storage.Record
	if len(val) < recordHeaderLen {
		return r, fmt.Errorf("%w: record of %d bytes is shorter than its header", ErrCorrupt, len(val))
	}
	if val[0] != recordVersion {
		return r, fmt.Errorf("%w: unknown record version %d", ErrCorrupt, val[0])
	}
	flags := val[1]
	if flags&^knownFlags != 0 {
		return r, fmt.Errorf("%w: unknown record flags %#x", ErrCorrupt, flags)
	}
	r.Persistent = flags&flagPersistent != 0
	r.Priority = val[2]
	r.EnqueuedAt = int64(binary.BigEndian.Uint64(val[3:]))
	pos := recordHeaderLen
	exp, n := binary.Varint(val[pos:])
	// Overlong varints are refused too, so that every record has exactly
	// one encoding.
	if n <= 0 || n != varintLen(exp) {
		return r, fmt.Errorf("%w: bad expiry", ErrCorrupt)
	}
	r.ExpiresAt = exp
	pos += n

	// Find the three length-prefixed fields before copying anything.
	var spans [3][2]int // [start, end) in val
	for i, what := range [...]string{"exchange", "routing key", "properties"} {
		l, n := binary.Uvarint(val[pos:])
		if n <= 0 || n != uvarintLen(l) || l > uint64(len(val)-pos-n) {
			return r, fmt.Errorf("%w: bad %s length", ErrCorrupt, what)
		}
		pos += n
		spans[i] = [2]int{pos, pos + int(l)}
		pos += int(l)
	}

	if flags&flagProperties == 0 && spans[2][1] > spans[2][0] {
		return r, fmt.Errorf("%w: properties bytes on a record without properties", ErrCorrupt)
	}
	if flags&flagBody == 0 && pos < len(val) {
		return r, fmt.Errorf("%w: body bytes on a record without a body", ErrCorrupt)
	}

	// One copy of everything past the header serves all four fields: a
	// record costs one allocation to read. The strings point into it too,
	// which is safe because nothing else can reach those bytes: the
	// Properties and Body slices are capped at their own ends.
	base := spans[0][0]
	buf := make([]byte, len(val)-base)
	copy(buf, val[base:])
	sub := func(s [2]int) []byte { return buf[s[0]-base : s[1]-base : s[1]-base] }
	r.Exchange = bytesToString(sub(spans[0]))
	r.RoutingKey = bytesToString(sub(spans[1]))
	if flags&flagProperties != 0 {
		r.Properties = sub(spans[2])
	}
	if flags&flagBody != 0 {
		r.Body = buf[pos-base:]
	}
	return r, nil
}

func bytesToString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Shard state value layout, version 2:
//
//	[0]      version (2)
//	uvarint  next offset
//
// Version 1 also held the live record count, rewritten by every delete.
// The count now comes from the scan that loads a shard's live offsets (see
// liveSet), so deletes write no state; version 1 values still decode, their
// count checked for sanity and ignored.
const (
	stateVersion   = 2
	stateVersionV1 = 1
)

func appendState(dst []byte, next uint64) []byte {
	dst = append(dst, stateVersion)
	return binary.AppendUvarint(dst, next)
}

func decodeState(val []byte) (next uint64, err error) {
	if len(val) == 0 || (val[0] != stateVersion && val[0] != stateVersionV1) {
		return 0, fmt.Errorf("%w: bad shard state", ErrCorrupt)
	}
	next, n := binary.Uvarint(val[1:])
	if n <= 0 || n != uvarintLen(next) {
		return 0, fmt.Errorf("%w: bad shard state next offset", ErrCorrupt)
	}
	if val[0] == stateVersion {
		if 1+n != len(val) {
			return 0, fmt.Errorf("%w: bad shard state: %d trailing bytes", ErrCorrupt, len(val)-1-n)
		}
		return next, nil
	}
	count, m := binary.Uvarint(val[1+n:])
	if m <= 0 || m != uvarintLen(count) || 1+n+m != len(val) {
		return 0, fmt.Errorf("%w: bad shard state count", ErrCorrupt)
	}
	if count > next {
		return 0, fmt.Errorf("%w: shard state counts %d live records below offset %d", ErrCorrupt, count, next)
	}
	return next, nil
}
