package pebble

import (
	"encoding/binary"
	"fmt"
	"math/bits"

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
//	live page:   's' uvarint(len(shard)) shard 'l' chunk(8 bytes, big-endian)
//	transient:   's' uvarint(len(shard)) shard 't' chunk(8 bytes, big-endian)
//
// A page is one liveSet chunk (chunkBits offsets from chunk*chunkBits) as
// chunkWords little-endian words: 'l' pages hold the live offsets, 't'
// pages the live offsets whose record is not Persistent. A chunk with no
// offset set has no page.
//
// The length prefix makes shard prefixes prefix-free (uvarint encodings
// are), so no shard's keys fall inside another's range however the names
// compare; big-endian offsets make key order offset order.
const (
	keyPrefix  = 's'
	kindRecord = 'r'
	kindState  = 'm'
	kindLive   = 'l'
	kindTrans  = 't'
	offsetLen  = 8
	pageLen    = chunkWords * 8
)

// appendPageKey appends the key of the page of kind for chunk key.
func appendPageKey(dst, prefix []byte, kind byte, key uint64) []byte {
	dst = append(dst, prefix...)
	dst = append(dst, kind)
	return binary.BigEndian.AppendUint64(dst, key)
}

// appendPage appends c's bits as a page value.
func appendPage(dst []byte, c *chunk) []byte {
	for _, w := range c.bits {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return dst
}

// decodePage sets c's bits from a page value and counts them.
func decodePage(c *chunk, val []byte) error {
	if len(val) != pageLen {
		return fmt.Errorf("%w: page of %d bytes, want %d", ErrCorrupt, len(val), pageLen)
	}
	c.n = 0
	for i := range c.bits {
		c.bits[i] = binary.LittleEndian.Uint64(val[i*8:])
		c.n += bits.OnesCount64(c.bits[i])
	}
	if c.n == 0 {
		return fmt.Errorf("%w: empty page", ErrCorrupt)
	}
	return nil
}

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

// Shard state value layout, version 3:
//
//	[0]      version (3)
//	uvarint  next offset
//
// Version 3 says the shard's live and transient pages are written, in the
// same batch as every change to them, so opening the shard reads its pages
// (a bit per message) instead of every record. Version 2 had no pages:
// the live offsets came from a scan of the record keys, and which records
// were transient from reading them all; a version 1 or 2 shard is scanned
// once and its pages written with a version 3 state. Version 1 also held
// the live record count, checked for sanity and ignored.
const (
	stateVersion   = 3
	stateVersionV2 = 2
	stateVersionV1 = 1
)

func appendState(dst []byte, next uint64) []byte {
	dst = append(dst, stateVersion)
	return binary.AppendUvarint(dst, next)
}

// decodeState returns the next offset and whether the state says the
// shard's pages are written (version 3).
func decodeState(val []byte) (next uint64, paged bool, err error) {
	if len(val) == 0 || val[0] < stateVersionV1 || val[0] > stateVersion {
		return 0, false, fmt.Errorf("%w: bad shard state", ErrCorrupt)
	}
	next, n := binary.Uvarint(val[1:])
	if n <= 0 || n != uvarintLen(next) {
		return 0, false, fmt.Errorf("%w: bad shard state next offset", ErrCorrupt)
	}
	if val[0] != stateVersionV1 {
		if 1+n != len(val) {
			return 0, false, fmt.Errorf("%w: bad shard state: %d trailing bytes", ErrCorrupt, len(val)-1-n)
		}
		return next, val[0] == stateVersion, nil
	}
	count, m := binary.Uvarint(val[1+n:])
	if m <= 0 || m != uvarintLen(count) || 1+n+m != len(val) {
		return 0, false, fmt.Errorf("%w: bad shard state count", ErrCorrupt)
	}
	if count > next {
		return 0, false, fmt.Errorf("%w: shard state counts %d live records below offset %d", ErrCorrupt, count, next)
	}
	return next, false, nil
}
