package raftlink

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// After a handshake with the cluster secret, the bytes of a connection go
// in sealed records, as TLS's do: a 2-byte big-endian length, then at most
// MaxRecordPlain bytes sealed with AES-256-GCM under the session key (the
// 16-byte tag included in the length). The nonce is the record's sequence
// number on the connection, so a record that is dropped, repeated,
// reordered or taken from another connection fails to open, and the
// reader stops. A reader holds one record at a time: what an attacker who
// does not hold the secret can make a member buffer is one record, never
// a frame.
//
// A reader of an opener should give it a *bufio.Reader of at least
// MaxRecordPlain+RecordTag+2 bytes, so that a record is one read.
const (
	MaxRecordPlain = 16 << 10
	RecordTag      = 16
	// sealBatch is how much plaintext a Write seals into one write to the
	// connection.
	sealBatch = 64 << 10
)

var ErrRecord = errors.New("a sealed record did not open (corrupt, forged or out of order)")

func newAEAD(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // the key is always 32 bytes
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// recordNonce is sequence number seq as a GCM nonce.
func recordNonce(n *[12]byte, seq uint64) []byte {
	binary.BigEndian.PutUint64(n[4:], seq)
	return n[:]
}

// A sealer writes what it is given to w in sealed records; NewSealer
// makes one.
type sealer struct {
	w     io.Writer
	aead  cipher.AEAD
	seq   uint64
	nonce [12]byte
	out   []byte
}

func NewSealer(w io.Writer, key []byte) io.Writer {
	return &sealer{w: w, aead: newAEAD(key)}
}

func (s *sealer) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		batch := p[:min(len(p), sealBatch)]
		out := s.out[:0]
		for rest := batch; len(rest) > 0; {
			chunk := rest[:min(len(rest), MaxRecordPlain)]
			rest = rest[len(chunk):]
			out = binary.BigEndian.AppendUint16(out, uint16(len(chunk)+RecordTag))
			out = s.aead.Seal(out, recordNonce(&s.nonce, s.seq), chunk, nil)
			s.seq++
		}
		s.out = out
		if _, err := s.w.Write(out); err != nil {
			return written, err
		}
		written += len(batch)
		p = p[len(batch):]
	}
	return written, nil
}

// An opener reads the records a sealer wrote and serves their plaintext.
type opener struct {
	r     *bufio.Reader
	aead  cipher.AEAD
	seq   uint64
	nonce [12]byte
	rec   []byte // the current record, opened in place
	plain []byte // what of it is not read yet
	err   error
}

func NewOpener(r *bufio.Reader, key []byte) io.Reader {
	return &opener{r: r, aead: newAEAD(key), rec: make([]byte, MaxRecordPlain+RecordTag)}
}

func (o *opener) Read(p []byte) (int, error) {
	for len(o.plain) == 0 {
		if o.err != nil {
			return 0, o.err
		}
		o.err = o.next()
	}
	n := copy(p, o.plain)
	o.plain = o.plain[n:]
	return n, nil
}

// next reads and opens the next record.
func (o *opener) next() error {
	var hdr [2]byte
	if _, err := io.ReadFull(o.r, hdr[:]); err != nil {
		return err
	}
	size := int(binary.BigEndian.Uint16(hdr[:]))
	if size <= RecordTag || size > MaxRecordPlain+RecordTag {
		return fmt.Errorf("%w: a record of %d bytes", ErrRecord, size)
	}
	rec := o.rec[:size]
	if _, err := io.ReadFull(o.r, rec); err != nil {
		return NoEOF(err)
	}
	plain, err := o.aead.Open(rec[:0], recordNonce(&o.nonce, o.seq), rec, nil)
	if err != nil {
		return ErrRecord
	}
	o.seq++
	o.plain = plain
	return nil
}
