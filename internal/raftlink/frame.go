package raftlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// FrameChunk is what a frame's buffer starts at and grows by, doubling:
// the length a frame announces is only an upper bound until its bytes
// arrive.
const FrameChunk = 64 << 10

// ErrFrameSize is a frame announcing more bytes than the reader's limit.
var ErrFrameSize = errors.New("frame too large")

// ReadFrame reads one frame from r (a 4-byte big-endian length of at most
// limit, then that many bytes) into buf, which grows as the bytes arrive,
// and returns it.
func ReadFrame(r io.Reader, limit int, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if uint64(size) > uint64(limit) {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFrameSize, size, limit)
	}
	n := int(size)
	buf = buf[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n, max(2*cap(buf), FrameChunk))-len(buf))
		}
		k, err := io.ReadFull(r, buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+k]
		if err != nil {
			return nil, NoEOF(err)
		}
	}
	return buf, nil
}
