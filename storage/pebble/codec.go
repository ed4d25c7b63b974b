package pebble

import (
	"encoding/binary"
	"fmt"

	"github.com/warrenmq/broker/internal/codec"
)

// ErrCorrupt is returned (wrapped) when a stored record or shard state does
// not decode: the database was damaged or written by something else. Check
// it with errors.Is. It is internal/codec's ErrCorrupt, so one check also
// covers the unacked index and a cluster member's store.
var ErrCorrupt = codec.ErrCorrupt

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

// Record values are internal/codec's versioned record encoding, the one a
// cluster member's state machine stores too.

// uvarintLen is the length of x's shortest uvarint encoding; decodeState
// refuses longer ones so that a state has one encoding.
func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
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
