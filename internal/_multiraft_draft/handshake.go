package multiraft

import (
	"bufio"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The members' handshake, meta/raft's (same messages, same checks, same
// sealing) under this protocol's own magic and labels, so a connection
// meant for one transport can never be taken for the other. Every
// connection between members starts with it, and the acceptor reads no
// frame before it succeeded:
//
//	dialer → acceptor   hello      magic "WRNM" | version 1 | kind | auth | 0 |
//	                               from id (8) | to id (8) | nonce (32)        56 bytes
//	acceptor → dialer   challenge  magic | version | status | auth | 0 |
//	                               id (8) | nonce (32) | proof (32)            80 bytes
//	dialer → acceptor   proof      (32 bytes; cluster secret only)
//	acceptor → dialer   verdict    (1 byte: 0 accepted)
//
// kind says what the connection carries (always kindGroups here),
// auth how members prove themselves (authSecret: the cluster secret; or
// authIdentity: only the ids, under mutual TLS or the Insecure opt-out).
// With a secret each side proves it holds it without sending it, by an
// HMAC-SHA256 keyed with it over the hello and the challenge without the
// proof (the transcript), which carry a fresh random nonce from each side:
// the acceptor's proof is over "warren-multiraft-v1 acceptor" and the
// transcript, the dialer's over "warren-multiraft-v1 dialer" and the
// transcript, so neither is the other's, and a captured handshake replayed
// to either side fails against the nonce that side just chose. The frames
// that follow are then sealed (records below) with a key derived from the
// secret and the transcript, so the session is bound to the handshake: no
// frame can be inserted, changed, replayed or moved to another connection
// by anyone without the secret.
//
// An acceptor checks before it answers that the hello is this protocol's,
// is addressed to its id and uses its kind of authentication (status
// says which check failed), and once the dialer proved itself that the
// dialer's id is a member it knows (verdict); a dialer checks the
// acceptor's id and proof. Each side gives up on the first failure.
const (
	wireMagic   = "WRNM"
	wireVersion = 1

	kindGroups byte = 1 // every group's raft messages, multiplexed

	authIdentity byte = 0
	authSecret   byte = 1

	nonceSize     = 32
	proofSize     = sha256.Size
	helloSize     = 8 + 8 + 8 + nonceSize
	challengeSize = 8 + 8 + nonceSize + proofSize
)

// A challenge's status and the verdict.
const (
	statusOK         byte = 0
	statusNotMe      byte = 1 // the hello is addressed to another id
	statusAuthMode   byte = 2 // the sides authenticate differently
	verdictRefused   byte = 1 // the dialer's proof is wrong
	verdictNotMember byte = 2 // the dialer is not a member here
)

var (
	// errProtocol is a peer that does not speak this protocol (or this
	// version of it).
	errProtocol = errors.New("multiraft: not a Warren member's handshake (another protocol, or another version)")
	// errBadProof is a peer that does not hold this member's cluster
	// secret.
	errBadProof = errors.New("the peer did not prove it holds the cluster secret")
)

// hello is the dialer's first message.
type hello struct {
	kind, auth byte
	from, to   uint64
	nonce      [nonceSize]byte
}

func (h *hello) append(b []byte) []byte {
	b = append(b, wireMagic...)
	b = append(b, wireVersion, h.kind, h.auth, 0)
	b = binary.BigEndian.AppendUint64(b, h.from)
	b = binary.BigEndian.AppendUint64(b, h.to)
	return append(b, h.nonce[:]...)
}

func parseHello(b []byte) (hello, error) {
	var h hello
	if len(b) != helloSize || string(b[:4]) != wireMagic || b[4] != wireVersion {
		return h, errProtocol
	}
	h.kind, h.auth = b[5], b[6]
	if h.kind != kindGroups || h.auth > authSecret || b[7] != 0 {
		return h, errProtocol
	}
	h.from = binary.BigEndian.Uint64(b[8:])
	h.to = binary.BigEndian.Uint64(b[16:])
	copy(h.nonce[:], b[24:])
	return h, nil
}

// challenge is the acceptor's answer to a hello.
type challenge struct {
	status, auth byte
	id           uint64
	nonce        [nonceSize]byte
	proof        [proofSize]byte // zero unless auth is authSecret and status OK
}

// appendSigned appends the challenge without its proof: the part the
// transcript holds.
func (c *challenge) appendSigned(b []byte) []byte {
	b = append(b, wireMagic...)
	b = append(b, wireVersion, c.status, c.auth, 0)
	b = binary.BigEndian.AppendUint64(b, c.id)
	return append(b, c.nonce[:]...)
}

func parseChallenge(b []byte) (challenge, error) {
	var c challenge
	if len(b) != challengeSize || string(b[:4]) != wireMagic || b[4] != wireVersion || b[7] != 0 {
		return c, errProtocol
	}
	c.status, c.auth = b[5], b[6]
	c.id = binary.BigEndian.Uint64(b[8:])
	copy(c.nonce[:], b[16:])
	copy(c.proof[:], b[16+nonceSize:])
	return c, nil
}

// handshaker runs one side of the handshake for member self.
type handshaker struct {
	self   uint64
	secret []byte // nil: authIdentity
	rand   io.Reader
}

func (hs *handshaker) auth() byte {
	if hs.secret != nil {
		return authSecret
	}
	return authIdentity
}

// mac is HMAC-SHA256 keyed with the secret over label and transcript.
func (hs *handshaker) mac(label string, transcript []byte) []byte {
	m := hmac.New(sha256.New, hs.secret)
	m.Write([]byte(label))
	m.Write(transcript)
	return m.Sum(nil)
}

// sessionKey derives the key of the connection's records from the secret
// and the transcript (HKDF-SHA256): a key per connection.
func (hs *handshaker) sessionKey(transcript []byte) []byte {
	k, err := hkdf.Key(sha256.New, hs.secret, transcript, "warren-multiraft-v1 frames", 32)
	if err != nil {
		panic(err) // only for a key length HKDF-SHA256 cannot give
	}
	return k
}

// dial runs the dialer's side on rw, a connection to member to that will
// carry kind, and returns what frames are written to: rw itself, or a
// writer that seals them.
func (hs *handshaker) dial(rw io.ReadWriter, kind byte, to uint64) (io.Writer, error) {
	h := hello{kind: kind, auth: hs.auth(), from: hs.self, to: to}
	if _, err := io.ReadFull(hs.rand, h.nonce[:]); err != nil {
		return nil, fmt.Errorf("multiraft: handshake nonce: %w", err)
	}
	transcript := h.append(make([]byte, 0, helloSize+challengeSize))
	if _, err := rw.Write(transcript); err != nil {
		return nil, err
	}
	var buf [challengeSize]byte
	if _, err := io.ReadFull(rw, buf[:]); err != nil {
		return nil, fmt.Errorf("multiraft: handshake: %w", noEOF(err))
	}
	c, err := parseChallenge(buf[:])
	if err != nil {
		return nil, err
	}
	switch {
	case c.status == statusNotMe:
		return nil, fmt.Errorf("multiraft: handshake: the peer there is member %d, not %d", c.id, to)
	case c.status == statusAuthMode || c.status == statusOK && c.auth != h.auth:
		return nil, fmt.Errorf("multiraft: handshake: the peer authenticates members %s, this member %s", authName(c.auth), authName(h.auth))
	case c.status != statusOK || c.id != to:
		return nil, errProtocol
	}
	transcript = c.appendSigned(transcript)
	if hs.secret != nil {
		if !hmac.Equal(c.proof[:], hs.mac("warren-multiraft-v1 acceptor", transcript)) {
			return nil, fmt.Errorf("multiraft: handshake with member %d: %w (is it another cluster's member, or was it given another secret?)", to, errBadProof)
		}
		if _, err := rw.Write(hs.mac("warren-multiraft-v1 dialer", transcript)); err != nil {
			return nil, err
		}
	}
	var verdict [1]byte
	if _, err := io.ReadFull(rw, verdict[:]); err != nil {
		return nil, fmt.Errorf("multiraft: handshake: %w", noEOF(err))
	}
	switch verdict[0] {
	case statusOK:
	case verdictRefused:
		return nil, fmt.Errorf("multiraft: handshake: member %d refused this member's proof: the two hold different cluster secrets", to)
	case verdictNotMember:
		return nil, fmt.Errorf("multiraft: handshake: member %d does not know member %d (not added yet, or removed)", to, hs.self)
	default:
		return nil, errProtocol
	}
	if hs.secret == nil {
		return rw, nil
	}
	return newSealer(rw, hs.sessionKey(transcript)), nil
}

// accept runs the acceptor's side: it reads the hello from r and answers
// on w. It returns the dialer's hello (its id and the connection's kind)
// and what the frames are read from: r itself, or a reader that opens
// sealed records. isMember says whether an id is a member this one knows.
func (hs *handshaker) accept(r *bufio.Reader, w io.Writer, isMember func(uint64) bool) (hello, io.Reader, error) {
	// The magic and version first: anything else is refused before the
	// rest of a hello arrives.
	var buf [helloSize]byte
	if _, err := io.ReadFull(r, buf[:5]); err != nil {
		return hello{}, nil, fmt.Errorf("multiraft: handshake: %w", noEOF(err))
	}
	if string(buf[:4]) != wireMagic || buf[4] != wireVersion {
		return hello{}, nil, errProtocol
	}
	if _, err := io.ReadFull(r, buf[5:]); err != nil {
		return hello{}, nil, fmt.Errorf("multiraft: handshake: %w", noEOF(err))
	}
	h, err := parseHello(buf[:])
	if err != nil {
		return h, nil, err
	}
	c := challenge{auth: hs.auth(), id: hs.self}
	switch {
	case h.to != hs.self:
		c.status = statusNotMe
	case h.auth != c.auth:
		c.status = statusAuthMode
	}
	if _, err := io.ReadFull(hs.rand, c.nonce[:]); err != nil {
		return h, nil, fmt.Errorf("multiraft: handshake nonce: %w", err)
	}
	transcript := c.appendSigned(append(make([]byte, 0, helloSize+challengeSize), buf[:]...))
	if c.status == statusOK && hs.secret != nil {
		copy(c.proof[:], hs.mac("warren-multiraft-v1 acceptor", transcript))
	}
	out := append(c.appendSigned(make([]byte, 0, challengeSize)), c.proof[:]...)
	if _, err := w.Write(out); err != nil {
		return h, nil, err
	}
	switch c.status {
	case statusNotMe:
		return h, nil, fmt.Errorf("multiraft: handshake: the dialer wants member %d, this is %d", h.to, hs.self)
	case statusAuthMode:
		return h, nil, fmt.Errorf("multiraft: handshake: the dialer authenticates %s, this member %s", authName(h.auth), authName(c.auth))
	}
	if hs.secret != nil {
		var proof [proofSize]byte
		if _, err := io.ReadFull(r, proof[:]); err != nil {
			return h, nil, fmt.Errorf("multiraft: handshake: %w", noEOF(err))
		}
		if !hmac.Equal(proof[:], hs.mac("warren-multiraft-v1 dialer", transcript)) {
			_, _ = w.Write([]byte{verdictRefused})
			return h, nil, fmt.Errorf("multiraft: handshake with member %d: %w", h.from, errBadProof)
		}
	}
	if h.from == hs.self || !isMember(h.from) {
		_, _ = w.Write([]byte{verdictNotMember})
		return h, nil, fmt.Errorf("multiraft: handshake: %d is not a member this one knows", h.from)
	}
	if _, err := w.Write([]byte{statusOK}); err != nil {
		return h, nil, err
	}
	if hs.secret == nil {
		return h, r, nil
	}
	return h, newOpener(r, hs.sessionKey(transcript)), nil
}

func authName(a byte) string {
	if a == authSecret {
		return "with the cluster secret"
	}
	return "without a cluster secret (mutual TLS or none)"
}

// noEOF turns a clean end of stream in the middle of a handshake into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
