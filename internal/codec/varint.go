package codec

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// ErrCorrupt is wrapped by every decoding error: a stored value that does
// not decode means a damaged disk or data written by something else.
var ErrCorrupt = errors.New("corrupt stored data")

// uvarintLen is the length of v's shortest uvarint encoding. The decoders
// reject longer ones (binary.Uvarint accepts them) so that every value has
// exactly one encoding.
func uvarintLen(v uint64) int { return max(1, (bits.Len64(v)+6)/7) }

// varintLen is the length of x's varint encoding (zig-zag, as
// binary.AppendVarint writes it).
func varintLen(x int64) int { return uvarintLen(zigzag(x)) }

// zigzag maps a varint's value to the uvarint binary.AppendVarint writes.
func zigzag(x int64) uint64 { return uint64(x<<1) ^ uint64(x>>63) }

func appendLP(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// readLP reads a length-prefixed string, checking the length against what
// is left before slicing.
func readLP(b []byte) (string, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || w != uvarintLen(n) || n > uint64(len(b)-w) {
		return "", nil, ErrCorrupt
	}
	return string(b[w : w+int(n)]), b[w+int(n):], nil
}

func readUvarint(b []byte, max uint64) (uint64, []byte, error) {
	v, w := binary.Uvarint(b)
	if w <= 0 || w != uvarintLen(v) || v > max {
		return 0, nil, ErrCorrupt
	}
	return v, b[w:], nil
}
