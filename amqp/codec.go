package amqp

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// Primitive encoders shared by the generated method codecs, tables and properties.
// Integers are big-endian (spec §4.2.5.1).

func appendUint16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func appendUint32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }
func appendUint64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// appendShortstr writes a length octet and the bytes. A short string cannot carry more
// than 255 bytes (§4.2.5.3); longer values are cut at the last UTF-8 rune boundary that
// fits, the way RabbitMQ truncates long reply texts, rather than failing an encoder
// that has no error result.
func appendShortstr(dst []byte, s string) []byte {
	s = truncate(s, math.MaxUint8)
	dst = append(dst, uint8(len(s)))
	return append(dst, s...)
}

// appendLongstr writes a 32-bit length and the bytes.
func appendLongstr(dst []byte, s string) []byte {
	s = truncate(s, math.MaxUint32)
	dst = appendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut > n-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if !utf8.RuneStart(s[cut]) {
		cut = n // not UTF-8 anyway: keep the bytes
	}
	return s[:cut]
}

// decoder reads method arguments. The first failure sticks, so the generated code reads
// field after field without checking, and finish reports what went wrong.
type decoder struct {
	src  []byte
	off  int
	fail string // the first failure, "" while all is well
	err  error  // a nested *Error (from a table), if that was the failure
}

func (d *decoder) need(n int, what string) bool {
	if d.fail != "" {
		return false
	}
	if len(d.src)-d.off < n {
		d.fail = "truncated " + what
		return false
	}
	return true
}

func (d *decoder) octet() uint8 {
	if !d.need(1, "octet") {
		return 0
	}
	v := d.src[d.off]
	d.off++
	return v
}

func (d *decoder) short() uint16 {
	if !d.need(2, "short") {
		return 0
	}
	v := binary.BigEndian.Uint16(d.src[d.off:])
	d.off += 2
	return v
}

func (d *decoder) long() uint32 {
	if !d.need(4, "long") {
		return 0
	}
	v := binary.BigEndian.Uint32(d.src[d.off:])
	d.off += 4
	return v
}

func (d *decoder) longlong() uint64 {
	if !d.need(8, "longlong") {
		return 0
	}
	v := binary.BigEndian.Uint64(d.src[d.off:])
	d.off += 8
	return v
}

// setString stores b in *dst, allocating only when the value changed: a session that
// decodes every basic.publish of a channel into one struct pays nothing for the
// exchange and routing key it sees again and again.
func setString(dst *string, b []byte) {
	if string(b) != *dst {
		*dst = string(b)
	}
}

func (d *decoder) shortstr(dst *string) {
	if !d.need(1, "shortstr") {
		return
	}
	n := int(d.src[d.off])
	if !d.need(1+n, "shortstr") {
		return
	}
	setString(dst, d.src[d.off+1:d.off+1+n])
	d.off += 1 + n
}

func (d *decoder) longstr(dst *string) {
	if !d.need(4, "longstr") {
		return
	}
	n := uint64(binary.BigEndian.Uint32(d.src[d.off:]))
	// Compare as uint64: the length is checked against the input before any allocation.
	if uint64(len(d.src)-d.off-4) < n {
		d.fail = "truncated longstr"
		return
	}
	setString(dst, d.src[d.off+4:d.off+4+int(n)])
	d.off += 4 + int(n)
}

func (d *decoder) table(dst *Table) {
	if d.fail != "" {
		return
	}
	t, n, err := parseTable(d.src[d.off:], 0, true)
	if err != nil {
		d.fail = "bad table"
		d.err = err
		return
	}
	*dst = t
	d.off += n
}

// finish reports the first failure, or trailing bytes, as a SyntaxError for the method.
// RabbitMQ's decoder also matches the whole argument list exactly.
func (d *decoder) finish(classID, methodID uint16) error {
	if d.fail == "" && d.off != len(d.src) {
		d.fail = "trailing bytes after the arguments"
	}
	if d.fail == "" {
		return nil
	}
	// The method's name is not repeated in the text: the close method carries the ids
	// and Error() names it.
	if e, ok := d.err.(*Error); ok {
		return NewError(SyntaxError, classID, methodID, "malformed arguments: %s", e.detail())
	}
	return NewError(SyntaxError, classID, methodID, "malformed arguments: %s", d.fail)
}
