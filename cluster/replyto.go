package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/internal/peer"
	"github.com/warrenmq/broker/meta/raft"
)

// DefaultReplyTimeout is how long a member waits for another member's
// answer about a forwarded direct reply-to reply whose outcome it needs.
const DefaultReplyTimeout = time.Second

// The bounds of one peer's queue of forwarded replies: past them a reply
// is dropped (and a mandatory one returned), so a flood of replies to the
// requesters of a slow or unreachable member holds at most this much. A
// single reply larger than maxReplyQueueBytes still goes alone, into an
// empty queue.
const (
	maxReplyQueueMsgs  = 4096
	maxReplyQueueBytes = 16 << 20
)

// replyMemberRefresh is how often the router rereads the membership, for
// members that joined or left.
const replyMemberRefresh = 2 * time.Second

// The kinds of the router's messages, the first byte of a raft.Message's
// data. A reply or a probe with a non-zero request id wants an answer.
const (
	kindReply  byte = 1 // id, vhost, name, props, body
	kindProbe  byte = 2 // id, vhost, name: is a requester consuming under name?
	kindAnswer byte = 3 // id, one byte: 1 yes, 0 no
)

// replyRouter is the node's peer.Forwarder: it carries direct
// reply-to replies to the member whose broker holds the requester, over
// the raft transport's Messages (raft.Messenger), and delivers the ones
// other members forward here. Its reply names carry the member's raft id
// as their tag. Replies are not replicated or persisted (RabbitMQ's are
// not either): one whose member is unreachable is lost, or returned when
// mandatory.
//
// It runs a receiver goroutine, a membership refresher, and one sender
// goroutine per member it sends to, all stopped by close. Publishers'
// goroutines only queue (and, for an answer, wait with a bound).
type replyRouter struct {
	msgr    raft.Messenger
	self    uint64
	timeout time.Duration
	log     *slog.Logger
	// receiver is what the member's current broker attached (nil while
	// it has none); members reads the membership (raft.Node.Peers).
	receiver atomic.Pointer[peer.Receiver]
	members  func(context.Context) ([]raft.Peer, error)

	nextID atomic.Uint64
	// queued is the bytes of the messages in every peer's queue and in the
	// batches being sent, which the broker's memory alarm counts
	// (MemoryBytes).
	queued atomic.Int64

	mu       sync.Mutex
	isMember map[uint64]bool
	peers    map[uint64]*replyPeer
	pending  map[uint64]chan bool
	closed   bool

	ctx    context.Context // ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// replyPeer is the bounded outgoing queue of one member, drained by its
// sender goroutine (run).
type replyPeer struct {
	r    *replyRouter
	to   uint64
	wake chan struct{} // capacity 1
	quit chan struct{} // closed when the member left

	mu    sync.Mutex
	msgs  []raft.Message
	bytes int
	gone  bool // the sender exited (release): nothing is queued any more
}

func newReplyRouter(n *Node, msgr raft.Messenger, timeout time.Duration) *replyRouter {
	return startReplyRouter(&replyRouter{
		msgr: msgr, self: n.cfg.Raft.ID, timeout: timeout, log: n.log,
		members: n.raft.Peers,
	}, n.cfg.Raft.Peers)
}

// startReplyRouter starts r, whose msgr, self, timeout, log and
// members are set, knowing peers as the members until it reads them.
func startReplyRouter(r *replyRouter, peers []raft.Peer) *replyRouter {
	r.isMember = map[uint64]bool{}
	r.peers = map[uint64]*replyPeer{}
	r.pending = map[uint64]chan bool{}
	for _, p := range peers {
		r.isMember[p.ID] = true
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.receive() }()
	go func() { defer r.wg.Done(); r.refreshMembers() }()
	return r
}

// close stops the router's goroutines; waiting forwards return false.
func (r *replyRouter) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// MemoryBytes returns the bytes of the replies, probes and answers queued
// for other members, or being handed to the transport: the broker counts
// them against its memory alarm (storage.MemoryReporter). Each member's
// queue is bounded by maxReplyQueueBytes too.
func (r *replyRouter) MemoryBytes() int64 { return r.queued.Load() }

// Attach implements peer.Forwarder: the member's broker, started
// or stopped.
func (r *replyRouter) Attach(rcv peer.Receiver) {
	if rcv == nil {
		r.receiver.Store(nil)
		return
	}
	r.receiver.Store(&rcv)
}

// ReplyTag implements peer.Forwarder: the member's raft id.
func (r *replyRouter) ReplyTag() string { return strconv.FormatUint(r.self, 10) }

// ForwardReply implements peer.Forwarder.
func (r *replyRouter) ForwardReply(vhost, tag, name string, props, body []byte, wait bool) bool {
	to, ok := r.member(tag)
	if !ok {
		return false
	}
	if !wait {
		return r.enqueue(to, encodeReply(kindReply, 0, vhost, name, props, body))
	}
	return r.ask(to, func(id uint64) []byte { return encodeReply(kindReply, id, vhost, name, props, body) })
}

// ReplyExists implements peer.Forwarder.
func (r *replyRouter) ReplyExists(vhost, tag, name string) bool {
	to, ok := r.member(tag)
	if !ok {
		return false
	}
	return r.ask(to, func(id uint64) []byte { return encodeReply(kindProbe, id, vhost, name, nil, nil) })
}

// member parses a reply tag: another member's raft id.
func (r *replyRouter) member(tag string) (uint64, bool) {
	id, err := strconv.ParseUint(tag, 10, 64)
	if err != nil || id == r.self {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return id, r.isMember[id]
}

// ask sends the message msg builds with a fresh request id to member to
// and waits, at most r.timeout, for the answer. No answer is false: the
// member is down, cut off, or too slow, and the reply counts as unroutable.
func (r *replyRouter) ask(to uint64, msg func(id uint64) []byte) bool {
	id := r.nextID.Add(1)
	answer := make(chan bool, 1)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.pending[id] = answer
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
	}()
	if !r.enqueue(to, msg(id)) {
		return false
	}
	t := time.NewTimer(r.timeout)
	defer t.Stop()
	select {
	case ok := <-answer:
		return ok
	case <-t.C:
		return false
	case <-r.ctx.Done():
		return false
	}
}

// resolve hands an answer to the forward waiting for request id, if it
// still waits.
func (r *replyRouter) resolve(id uint64, ok bool) {
	r.mu.Lock()
	answer := r.pending[id]
	delete(r.pending, id)
	r.mu.Unlock()
	if answer != nil {
		answer <- ok // capacity 1, sent once
	}
}

// enqueue queues data for member to, starting its sender the first time,
// and reports false when the queue is full or the router closed.
func (r *replyRouter) enqueue(to uint64, data []byte) bool {
	r.mu.Lock()
	if r.closed || !r.isMember[to] {
		r.mu.Unlock()
		return false
	}
	p := r.peers[to]
	if p == nil {
		p = &replyPeer{r: r, to: to, wake: make(chan struct{}, 1), quit: make(chan struct{})}
		r.peers[to] = p
		r.wg.Add(1)
		go func() { defer r.wg.Done(); p.run() }()
	}
	r.mu.Unlock()
	return p.push(raft.Message{To: to, Data: data})
}

func (p *replyPeer) push(m raft.Message) bool {
	p.mu.Lock()
	if p.gone || len(p.msgs) >= maxReplyQueueMsgs || len(p.msgs) > 0 && p.bytes+len(m.Data) > maxReplyQueueBytes {
		p.mu.Unlock()
		return false
	}
	p.msgs = append(p.msgs, m)
	p.bytes += len(m.Data)
	p.r.queued.Add(int64(len(m.Data)))
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// run hands what is queued to the transport, all of it at once. When the
// transport fails (the member is down or unreachable), the forwards in the
// batch that wait for an answer get false at once rather than after the
// timeout.
func (p *replyPeer) run() {
	r := p.r
	for {
		select {
		case <-p.wake:
		case <-p.quit:
			p.release()
			return
		case <-r.ctx.Done():
			p.release()
			return
		}
		p.mu.Lock()
		batch, n := p.msgs, p.bytes
		p.msgs, p.bytes = nil, 0
		p.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		err := r.msgr.SendMessages(r.ctx, batch)
		r.queued.Add(-int64(n)) // counted until the transport has it
		if err != nil {
			for _, m := range batch {
				if kind, id, ok := requestID(m.Data); ok && id != 0 && kind != kindAnswer {
					r.resolve(id, false)
				}
			}
		}
	}
}

// release drops what is still queued for a member that left or a router
// that closed.
func (p *replyPeer) release() {
	p.mu.Lock()
	p.r.queued.Add(-int64(p.bytes))
	p.msgs, p.bytes, p.gone = nil, 0, true
	p.mu.Unlock()
}

// receive delivers the replies and answers other members send.
func (r *replyRouter) receive() {
	in := r.msgr.Messages()
	for {
		select {
		case m := <-in:
			r.handle(m)
		case <-r.ctx.Done():
			return
		}
	}
}

// handle serves one message from another member. The TCP transport
// delivers only what an authenticated member sent, with its id; one from
// an id that is not a member (a transport that does not authenticate, or a
// member removed meanwhile) is dropped.
func (r *replyRouter) handle(m raft.Message) {
	r.mu.Lock()
	member := r.isMember[m.From] && m.From != r.self
	r.mu.Unlock()
	if !member {
		r.log.Warn("cluster: dropped a member message from a non-member", "from", m.From)
		return
	}
	msg, err := decodeReply(m.Data)
	if err != nil {
		r.log.Warn("cluster: dropped a malformed member message", "from", m.From, "err", err)
		return
	}
	if msg.kind == kindAnswer {
		r.resolve(msg.id, msg.yes)
		return
	}
	var ok bool
	if rp := r.receiver.Load(); rp != nil {
		if msg.kind == kindReply {
			ok = (*rp).DeliverReply(msg.vhost, msg.name, msg.props, msg.body)
		} else {
			ok = (*rp).ReplyExists(msg.vhost, msg.name)
		}
	}
	if msg.id != 0 {
		// Lost when m.From's queue is full: the asker times out.
		r.enqueue(m.From, encodeAnswer(msg.id, ok))
	}
}

// refreshMembers rereads the membership now and then, so members that
// joined can be forwarded to and the senders of members that left stop.
func (r *replyRouter) refreshMembers() {
	t := time.NewTicker(replyMemberRefresh)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-r.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(r.ctx, replyMemberRefresh/2)
		peers, err := r.members(ctx)
		cancel()
		if err != nil {
			continue // no leader now: keep what we knew
		}
		r.mu.Lock()
		clear(r.isMember)
		for _, p := range peers {
			r.isMember[p.ID] = true
		}
		for id, p := range r.peers {
			if !r.isMember[id] {
				close(p.quit)
				delete(r.peers, id)
			}
		}
		r.mu.Unlock()
	}
}

// replyMsg is a decoded router message.
type replyMsg struct {
	kind        byte
	id          uint64
	vhost, name string
	props, body []byte
	yes         bool
}

// encodeReply encodes a reply (kindReply) or a probe (kindProbe, no props
// or body): kind, id (8 bytes), vhost and name (a length byte each: both
// are AMQP short strings), then for a reply the props' length (4 bytes),
// the props and the body.
func encodeReply(kind byte, id uint64, vhost, name string, props, body []byte) []byte {
	b := make([]byte, 0, 1+8+2+len(vhost)+len(name)+4+len(props)+len(body))
	b = append(b, kind)
	b = binary.BigEndian.AppendUint64(b, id)
	b = append(b, byte(len(vhost)))
	b = append(b, vhost...)
	b = append(b, byte(len(name)))
	b = append(b, name...)
	if kind == kindReply {
		b = binary.BigEndian.AppendUint32(b, uint32(len(props)))
		b = append(b, props...)
		b = append(b, body...)
	}
	return b
}

func encodeAnswer(id uint64, yes bool) []byte {
	b := make([]byte, 0, 10)
	b = append(b, kindAnswer)
	b = binary.BigEndian.AppendUint64(b, id)
	if yes {
		return append(b, 1)
	}
	return append(b, 0)
}

// requestID reads a message's kind and request id.
func requestID(b []byte) (kind byte, id uint64, ok bool) {
	if len(b) < 9 {
		return 0, 0, false
	}
	return b[0], binary.BigEndian.Uint64(b[1:9]), true
}

var errMalformed = errors.New("cluster: malformed reply message")

// decodeReply decodes what encodeReply and encodeAnswer encode. The props
// and body it returns alias b.
func decodeReply(b []byte) (replyMsg, error) {
	kind, id, ok := requestID(b)
	if !ok {
		return replyMsg{}, errMalformed
	}
	m := replyMsg{kind: kind, id: id}
	b = b[9:]
	if kind == kindAnswer {
		if len(b) != 1 || b[0] > 1 {
			return replyMsg{}, errMalformed
		}
		m.yes = b[0] == 1
		return m, nil
	}
	if kind != kindReply && kind != kindProbe {
		return replyMsg{}, errMalformed
	}
	str := func() (string, bool) {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return "", false
		}
		s := string(b[1 : 1+int(b[0])])
		b = b[1+int(b[0]):]
		return s, true
	}
	if m.vhost, ok = str(); !ok {
		return replyMsg{}, errMalformed
	}
	if m.name, ok = str(); !ok {
		return replyMsg{}, errMalformed
	}
	if kind == kindProbe {
		if len(b) != 0 {
			return replyMsg{}, errMalformed
		}
		return m, nil
	}
	if len(b) < 4 || uint64(len(b)-4) < uint64(binary.BigEndian.Uint32(b)) {
		return replyMsg{}, errMalformed
	}
	n := int(binary.BigEndian.Uint32(b))
	m.props, m.body = b[4:4+n:4+n], b[4+n:]
	return m, nil
}

var _ peer.Forwarder = (*replyRouter)(nil)
