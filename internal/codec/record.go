package codec

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/warrenmq/broker/storage"
)

// Record value layout, version 1:
//
//	[0]      version (1)
//	[1]      flags: bit 0 Persistent, bit 1 Properties non-nil, bit 2 Body non-nil,
//	         bit 3 ClientHeaders (added within version 1: values written
//	         before it have it clear, which reads as false)
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
	// RecordVersion is the first byte of every record value.
	RecordVersion = 1

	flagPersistent = 1 << 0
	flagProperties = 1 << 1
	flagBody       = 1 << 2
	flagClient     = 1 << 3
	knownFlags     = flagPersistent | flagProperties | flagBody | flagClient

	recordHeaderLen = 3 + 8
)

// RecordLen returns len(AppendRecord(nil, r)), so a caller can reserve the
// value's space before encoding into it.
func RecordLen(r *storage.Record) int {
	return recordHeaderLen + varintLen(r.ExpiresAt) +
		uvarintLen(uint64(len(r.Exchange))) + len(r.Exchange) +
		uvarintLen(uint64(len(r.RoutingKey))) + len(r.RoutingKey) +
		uvarintLen(uint64(len(r.Properties))) + len(r.Properties) +
		len(r.Body)
}

// AppendRecord appends the encoding of r, without its offset, to dst.
func AppendRecord(dst []byte, r *storage.Record) []byte {
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
	if r.ClientHeaders {
		flags |= flagClient
	}
	dst = append(dst, RecordVersion, flags, r.Priority)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.EnqueuedAt))
	dst = binary.AppendVarint(dst, r.ExpiresAt)
	dst = appendLP(dst, r.Exchange)
	dst = appendLP(dst, r.RoutingKey)
	dst = binary.AppendUvarint(dst, uint64(len(r.Properties)))
	dst = append(dst, r.Properties...)
	return append(dst, r.Body...)
}

// DecodeRecord decodes a value written by AppendRecord; the offset is the
// caller's to set. The record owns its memory: val may be reused once
// DecodeRecord returns. Its strings and slices share one allocation.
func DecodeRecord(val []byte) (storage.Record, error) {
	var r storage.Record
	if len(val) < recordHeaderLen {
		return r, fmt.Errorf("%w: record of %d bytes is shorter than its header", ErrCorrupt, len(val))
	}
	if val[0] != RecordVersion {
		return r, fmt.Errorf("%w: unknown record version %d", ErrCorrupt, val[0])
	}
	flags := val[1]
	if flags&^knownFlags != 0 {
		return r, fmt.Errorf("%w: unknown record flags %#x", ErrCorrupt, flags)
	}
	r.Persistent = flags&flagPersistent != 0
	r.ClientHeaders = flags&flagClient != 0
	r.Priority = val[2]
	r.EnqueuedAt = int64(binary.BigEndian.Uint64(val[3:]))
	pos := recordHeaderLen
	exp, n := binary.Varint(val[pos:])
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
