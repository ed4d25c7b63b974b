package raftlink

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

// The members' handshake. Every connection between members starts with it,
// and the acceptor reads no frame before it succeeded:
//
//	dialer → acceptor   hello      magic (4) | version 1 | kind | auth | 0 |
//	                               from id (8) | to id (8) | nonce (32)        56 bytes
//	acceptor → dialer   challenge  magic | version | status | auth | 0 |
//	                               id (8) | nonce (32) | proof (32)            80 bytes
//	dialer → acceptor   proof      (32 bytes; cluster secret only)
//	acceptor → dialer   verdict    (1 byte: 0 accepted)
//
// The magic is the Protocol's (meta/raft's "WRNR", internal/multiraft's
// "WRNM"), kind says what the connection carries (a Protocol's kinds are 1
// to its MaxKind), auth how members prove themselves (AuthSecret: the cluster secret; or
// AuthIdentity: only the ids, under mutual TLS or the Insecure opt-out).
// With a secret each side proves it holds it without sending it, by an
// HMAC-SHA256 keyed with it over the hello and the challenge without the
// proof (the transcript), which carry a fresh random nonce from each side:
// the acceptor's proof is over the Protocol's label, " acceptor" and the
// transcript (meta/raft's label is "warren-raft-v1"), the dialer's over
// the label, " dialer" and the transcript, so neither is the other's, and a captured handshake replayed
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
	wireVersion = 1

	// AuthIdentity and AuthSecret are a hello's ways of authenticating.
	AuthIdentity byte = 0
	AuthSecret   byte = 1

	NonceSize = 32
	ProofSize = sha256.Size
	// HelloSize is a hello's length, ChallengeSize a challenge's with its
	// proof.
	HelloSize     = 8 + 8 + 8 + NonceSize
	ChallengeSize = 8 + 8 + NonceSize + ProofSize
)

// Protocol names one transport's handshake: its Magic (4 bytes), its
// Label (what proofs and session keys are derived under), its Name
// (the prefix of its errors) and the connection kinds it has, 1 to
// MaxKind.
type Protocol struct {
	Magic   string
	Label   string
	Name    string
	MaxKind byte
}

// A challenge's status and the verdict.
const (
	statusOK         byte = 0
	statusNotMe      byte = 1 // the hello is addressed to another id
	statusAuthMode   byte = 2 // the sides authenticate differently
	verdictRefused   byte = 1 // the dialer's proof is wrong
	verdictNotMember byte = 2 // the dialer is not a member here
)

var (
	// ErrProtocol is a peer that does not speak this protocol (or this
	// version of it).
	ErrProtocol = errors.New("not a Warren member's handshake (another protocol, or another version)")
	// ErrBadProof is a peer that does not hold this member's cluster
	// secret.
	ErrBadProof = errors.New("the peer did not prove it holds the cluster secret")
)

// Hello is the dialer's first message.
type Hello struct {
	Kind, Auth byte
	From, To   uint64
	Nonce      [NonceSize]byte
}

// Append appends h as protocol p's hello to b.
func (h *Hello) Append(b []byte, p *Protocol) []byte {
	b = append(b, p.Magic...)
	b = append(b, wireVersion, h.Kind, h.Auth, 0)
	b = binary.BigEndian.AppendUint64(b, h.From)
	b = binary.BigEndian.AppendUint64(b, h.To)
	return append(b, h.Nonce[:]...)
}

func (p *Protocol) parseHello(b []byte) (Hello, error) {
	var h Hello
	if len(b) != HelloSize || string(b[:4]) != p.Magic || b[4] != wireVersion {
		return h, p.errProtocol()
	}
	h.Kind, h.Auth = b[5], b[6]
	if h.Kind == 0 || h.Kind > p.MaxKind || h.Auth > AuthSecret || b[7] != 0 {
		return h, p.errProtocol()
	}
	h.From = binary.BigEndian.Uint64(b[8:])
	h.To = binary.BigEndian.Uint64(b[16:])
	copy(h.Nonce[:], b[24:])
	return h, nil
}

func (p *Protocol) errProtocol() error { return fmt.Errorf("%s: %w", p.Name, ErrProtocol) }

// challenge is the acceptor's answer to a hello.
type challenge struct {
	status, auth byte
	id           uint64
	nonce        [NonceSize]byte
	proof        [ProofSize]byte // zero unless auth is AuthSecret and status OK
}

// appendSigned appends the challenge without its proof: the part the
// transcript holds.
func (c *challenge) appendSigned(b []byte, p *Protocol) []byte {
	b = append(b, p.Magic...)
	b = append(b, wireVersion, c.status, c.auth, 0)
	b = binary.BigEndian.AppendUint64(b, c.id)
	return append(b, c.nonce[:]...)
}

func (p *Protocol) parseChallenge(b []byte) (challenge, error) {
	var c challenge
	if len(b) != ChallengeSize || string(b[:4]) != p.Magic || b[4] != wireVersion || b[7] != 0 {
		return c, p.errProtocol()
	}
	c.status, c.auth = b[5], b[6]
	c.id = binary.BigEndian.Uint64(b[8:])
	copy(c.nonce[:], b[16:])
	copy(c.proof[:], b[16+NonceSize:])
	return c, nil
}

// Handshaker runs one side of protocol Proto's handshake for member Self.
// Secret nil authenticates by identity only (AuthIdentity: under mutual
// TLS, or nothing); Rand gives the nonces.
type Handshaker struct {
	Proto  *Protocol
	Self   uint64
	Secret []byte
	Rand   io.Reader
}

func (hs *Handshaker) auth() byte {
	if hs.Secret != nil {
		return AuthSecret
	}
	return AuthIdentity
}

// mac is HMAC-SHA256 keyed with the secret over the label, role and
// transcript.
func (hs *Handshaker) mac(role string, transcript []byte) []byte {
	m := hmac.New(sha256.New, hs.Secret)
	m.Write([]byte(hs.Proto.Label + " " + role))
	m.Write(transcript)
	return m.Sum(nil)
}

// sessionKey derives the key of the connection's records from the secret
// and the transcript (HKDF-SHA256): a key per connection, and per
// direction (dir "frames" for the dialer's records, "frames back" for
// the acceptor's on a duplex connection).
func (hs *Handshaker) sessionKey(transcript []byte, dir string) []byte {
	k, err := hkdf.Key(sha256.New, hs.Secret, transcript, hs.Proto.Label+" "+dir, 32)
	if err != nil {
		panic(err) // only for a key length HKDF-SHA256 cannot give
	}
	return k
}

// Dial runs the dialer's side on rw, a connection to member to that will
// carry kind, and returns what frames are written to: rw itself, or a
// writer that seals them.
func (hs *Handshaker) Dial(rw io.ReadWriter, kind byte, to uint64) (io.Writer, error) {
	transcript, err := hs.dial(rw, kind, to)
	if err != nil {
		return nil, err
	}
	if hs.Secret == nil {
		return rw, nil
	}
	return NewSealer(rw, hs.sessionKey(transcript, "frames")), nil
}

// DialDuplex is Dial for a connection both sides write frames on: it reads
// the handshake's answers from r (conn's buffered reader, which it goes on
// reading frames from) and returns what frames are read from and written
// to, sealed each way under its own key with a secret.
func (hs *Handshaker) DialDuplex(conn io.Writer, r *bufio.Reader, kind byte, to uint64) (io.Reader, io.Writer, error) {
	transcript, err := hs.dial(struct {
		io.Reader
		io.Writer
	}{r, conn}, kind, to)
	if err != nil {
		return nil, nil, err
	}
	if hs.Secret == nil {
		return r, conn, nil
	}
	return NewOpener(r, hs.sessionKey(transcript, "frames back")), NewSealer(conn, hs.sessionKey(transcript, "frames")), nil
}

// dial runs the dialer's side and returns the transcript.
func (hs *Handshaker) dial(rw io.ReadWriter, kind byte, to uint64) ([]byte, error) {
	name := hs.Proto.Name
	h := Hello{Kind: kind, Auth: hs.auth(), From: hs.Self, To: to}
	if _, err := io.ReadFull(hs.Rand, h.Nonce[:]); err != nil {
		return nil, fmt.Errorf("%s: handshake nonce: %w", name, err)
	}
	transcript := h.Append(make([]byte, 0, HelloSize+ChallengeSize), hs.Proto)
	if _, err := rw.Write(transcript); err != nil {
		return nil, err
	}
	var buf [ChallengeSize]byte
	if _, err := io.ReadFull(rw, buf[:]); err != nil {
		return nil, fmt.Errorf("%s: handshake: %w", name, NoEOF(err))
	}
	c, err := hs.Proto.parseChallenge(buf[:])
	if err != nil {
		return nil, err
	}
	switch {
	case c.status == statusNotMe:
		return nil, fmt.Errorf("%s: handshake: the peer there is member %d, not %d", name, c.id, to)
	case c.status == statusAuthMode || c.status == statusOK && c.auth != h.Auth:
		return nil, fmt.Errorf("%s: handshake: the peer authenticates members %s, this member %s", name, authName(c.auth), authName(h.Auth))
	case c.status != statusOK || c.id != to:
		return nil, hs.Proto.errProtocol()
	}
	transcript = c.appendSigned(transcript, hs.Proto)
	if hs.Secret != nil {
		if !hmac.Equal(c.proof[:], hs.mac("acceptor", transcript)) {
			return nil, fmt.Errorf("%s: handshake with member %d: %w (is it another cluster's member, or was it given another secret?)", name, to, ErrBadProof)
		}
		if _, err := rw.Write(hs.mac("dialer", transcript)); err != nil {
			return nil, err
		}
	}
	var verdict [1]byte
	if _, err := io.ReadFull(rw, verdict[:]); err != nil {
		return nil, fmt.Errorf("%s: handshake: %w", name, NoEOF(err))
	}
	switch verdict[0] {
	case statusOK:
	case verdictRefused:
		return nil, fmt.Errorf("%s: handshake: member %d refused this member's proof: the two hold different cluster secrets", name, to)
	case verdictNotMember:
		return nil, fmt.Errorf("%s: handshake: member %d does not know member %d (not added yet, or removed)", name, to, hs.Self)
	default:
		return nil, hs.Proto.errProtocol()
	}
	return transcript, nil
}

// Accept runs the acceptor's side: it reads the hello from r and answers
// on w. It returns the dialer's hello (its id and the connection's kind)
// and what the frames are read from: r itself, or a reader that opens
// sealed records. isMember says whether an id is a member this one knows.
func (hs *Handshaker) Accept(r *bufio.Reader, w io.Writer, isMember func(uint64) bool) (Hello, io.Reader, error) {
	h, transcript, err := hs.accept(r, w, isMember)
	if err != nil {
		return h, nil, err
	}
	if hs.Secret == nil {
		return h, r, nil
	}
	return h, NewOpener(r, hs.sessionKey(transcript, "frames")), nil
}

// AcceptDuplex is Accept for a connection both sides write frames on: it
// also returns what this side's frames are written to (w, or a writer
// sealing them under the key of this direction).
func (hs *Handshaker) AcceptDuplex(r *bufio.Reader, w io.Writer, isMember func(uint64) bool) (Hello, io.Reader, io.Writer, error) {
	h, transcript, err := hs.accept(r, w, isMember)
	if err != nil {
		return h, nil, nil, err
	}
	if hs.Secret == nil {
		return h, r, w, nil
	}
	return h, NewOpener(r, hs.sessionKey(transcript, "frames")), NewSealer(w, hs.sessionKey(transcript, "frames back")), nil
}

// accept runs the acceptor's side and returns the hello and the
// transcript.
func (hs *Handshaker) accept(r *bufio.Reader, w io.Writer, isMember func(uint64) bool) (Hello, []byte, error) {
	name := hs.Proto.Name
	// The magic and version first: anything else is refused before the
	// rest of a hello arrives.
	var buf [HelloSize]byte
	if _, err := io.ReadFull(r, buf[:5]); err != nil {
		return Hello{}, nil, fmt.Errorf("%s: handshake: %w", name, NoEOF(err))
	}
	if string(buf[:4]) != hs.Proto.Magic || buf[4] != wireVersion {
		return Hello{}, nil, hs.Proto.errProtocol()
	}
	if _, err := io.ReadFull(r, buf[5:]); err != nil {
		return Hello{}, nil, fmt.Errorf("%s: handshake: %w", name, NoEOF(err))
	}
	h, err := hs.Proto.parseHello(buf[:])
	if err != nil {
		return h, nil, err
	}
	c := challenge{auth: hs.auth(), id: hs.Self}
	switch {
	case h.To != hs.Self:
		c.status = statusNotMe
	case h.Auth != c.auth:
		c.status = statusAuthMode
	}
	if _, err := io.ReadFull(hs.Rand, c.nonce[:]); err != nil {
		return h, nil, fmt.Errorf("%s: handshake nonce: %w", name, err)
	}
	transcript := c.appendSigned(append(make([]byte, 0, HelloSize+ChallengeSize), buf[:]...), hs.Proto)
	if c.status == statusOK && hs.Secret != nil {
		copy(c.proof[:], hs.mac("acceptor", transcript))
	}
	out := append(c.appendSigned(make([]byte, 0, ChallengeSize), hs.Proto), c.proof[:]...)
	if _, err := w.Write(out); err != nil {
		return h, nil, err
	}
	switch c.status {
	case statusNotMe:
		return h, nil, fmt.Errorf("%s: handshake: the dialer wants member %d, this is %d", name, h.To, hs.Self)
	case statusAuthMode:
		return h, nil, fmt.Errorf("%s: handshake: the dialer authenticates %s, this member %s", name, authName(h.Auth), authName(c.auth))
	}
	if hs.Secret != nil {
		var proof [ProofSize]byte
		if _, err := io.ReadFull(r, proof[:]); err != nil {
			return h, nil, fmt.Errorf("%s: handshake: %w", name, NoEOF(err))
		}
		if !hmac.Equal(proof[:], hs.mac("dialer", transcript)) {
			_, _ = w.Write([]byte{verdictRefused})
			return h, nil, fmt.Errorf("%s: handshake with member %d: %w", name, h.From, ErrBadProof)
		}
	}
	if h.From == hs.Self || !isMember(h.From) {
		_, _ = w.Write([]byte{verdictNotMember})
		return h, nil, fmt.Errorf("%s: handshake: %d is not a member this one knows", name, h.From)
	}
	if _, err := w.Write([]byte{statusOK}); err != nil {
		return h, nil, err
	}
	return h, transcript, nil
}

func authName(a byte) string {
	if a == AuthSecret {
		return "with the cluster secret"
	}
	return "without a cluster secret (mutual TLS or none)"
}

// NoEOF turns a clean end of stream in the middle of a handshake, a record
// or a frame into io.ErrUnexpectedEOF.
func NoEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
