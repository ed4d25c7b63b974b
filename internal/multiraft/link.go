package multiraft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/warrenmq/broker/internal/raftlink"
)

// Link is a message channel between members that someone else owns and
// authenticates (in package cluster: meta/raft's member messages, one
// connection per member pair beside raft's): LinkTransport carries the
// engine's frames over it, so the engine needs no listener, secret or
// certificate of its own.
type Link interface {
	// Send writes one message to member to, blocking at most while the
	// peer's connection takes it; an error means it was not sent.
	Send(to uint64, data []byte) error
	// Members are the other members now (it may change at run time).
	Members() []uint64
}

// LinkTransport is a Transport over a Link: one goroutine per peer
// encodes its frames (off the raft loop) and sends them; what arrives is
// handed in with Deliver, decoded and checked as TCP's reader does.
type LinkTransport struct {
	self  uint64
	link  Link
	inbox chan inbound
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	max   int

	mu      sync.Mutex
	peers   map[uint64]chan outgoing
	closed  bool
	refused raftlink.RateLog
	log     *slog.Logger
}

var _ Transport = (*LinkTransport)(nil)

// NewLinkTransport returns member self's transport over link. Close it
// after the engine's Close.
func NewLinkTransport(self uint64, link Link, log *slog.Logger) *LinkTransport {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LinkTransport{
		self: self, link: link, inbox: make(chan inbound, inboxSize), stop: make(chan struct{}),
		peers: map[uint64]chan outgoing{}, max: defaultMaxFrame, log: log,
	}
}

// Deliver hands in one message member from sent over the link. A message
// that does not decode, or carries a frame CheckMessage refuses, is
// dropped with the error; one arriving while the engine is behind is
// dropped as on a full socket (raft resends).
func (t *LinkTransport) Deliver(from uint64, data []byte) error {
	if from == 0 || from == t.self {
		return errors.New("multiraft: a link message from no member or from this one")
	}
	for b := data; len(b) > 0; {
		if len(b) < 4 {
			return fmt.Errorf("%w: truncated length", errFrame)
		}
		size := int(binary.BigEndian.Uint32(b))
		if size > len(b)-4 || size > t.max {
			return fmt.Errorf("%w: frame of %d bytes", errFrame, size)
		}
		f, err := decodeFrame(b[4:4+size], from, t.self)
		b = b[4+size:]
		if err != nil {
			t.refused.Warn(t.log, "multiraft: refused a link frame", "from", from, "err", err)
			return err
		}
		select {
		case t.inbox <- inbound{from: from, f: f}:
		case <-t.stop:
			return ErrClosed
		default:
		}
	}
	return nil
}

// Close stops the peers' goroutines.
func (t *LinkTransport) Close() {
	t.once.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
		close(t.stop)
	})
	t.wg.Wait()
}

func (t *LinkTransport) receive() <-chan inbound { return t.inbox }

func (t *LinkTransport) members() []uint64 {
	ids := slices.DeleteFunc(slices.Clone(t.link.Members()), func(id uint64) bool { return id == t.self || id == 0 })
	slices.Sort(ids)
	return slices.Compact(ids)
}

func (t *LinkTransport) send(to uint64, f *frame, sent func(bool)) bool {
	t.mu.Lock()
	q := t.peers[to]
	if q == nil && !t.closed {
		q = make(chan outgoing, queueSize)
		t.peers[to] = q
		t.wg.Add(1)
		go func() { defer t.wg.Done(); t.run(to, q) }()
	}
	t.mu.Unlock()
	if q == nil {
		return false
	}
	select {
	case q <- outgoing{to: to, f: f, sent: sent}:
		return true
	default:
		return false
	}
}

// run encodes and sends the frames queued for one peer, several queued
// frames in one message.
func (t *LinkTransport) run(to uint64, q chan outgoing) {
	var buf []byte
	var sents []func(bool)
	for {
		var o outgoing
		select {
		case <-t.stop:
			return
		case o = <-q:
		}
		buf, sents = buf[:0], sents[:0]
		for {
			var dropped []groupMsg
			buf, dropped = appendFrames(buf, o.f, t.max)
			if len(dropped) > 0 {
				t.refused.Warn(t.log, "multiraft: dropped messages larger than a frame", "to", to, "n", len(dropped))
			}
			if o.sent != nil {
				sents = append(sents, o.sent)
			}
			if len(buf) >= 1<<20 {
				break
			}
			select {
			case o = <-q:
				continue
			default:
			}
			break
		}
		err := t.sendFrames(to, buf)
		for _, s := range sents {
			s(err == nil)
		}
		if cap(buf) > 4<<20 {
			buf = nil
		}
	}
}

// sendFrames sends buf's frames to member to in messages of at most
// 4 MiB (or one frame) each, so that a snapshot's chunks do not go as one
// message of its size, stopping at the first that fails.
func (t *LinkTransport) sendFrames(to uint64, buf []byte) error {
	for len(buf) > 0 {
		n := framesWithin(buf, min(t.max, 4<<20))
		if err := t.link.Send(to, buf[:n]); err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}

// framesWithin is the length of buf's first frames that fit in limit
// bytes, or of its first frame when that alone does not.
func framesWithin(buf []byte, limit int) int {
	n := 0
	for n < len(buf) {
		size := 4 + int(binary.BigEndian.Uint32(buf[n:]))
		if n > 0 && n+size > limit {
			break
		}
		n += size
	}
	return n
}
