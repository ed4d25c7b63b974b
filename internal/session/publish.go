package session

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
)

// handlePublish receives a complete published message: the method, its raw
// properties and body (both owned by the callee from here on). It routes
// the message, returns it when mandatory and unroutable, and hands it to
// every queue it reaches; in confirm mode the publish is acked once every
// one of those queues has stored it.
func (ch *Channel) handlePublish(m *amqp.BasicPublish, props, body []byte) error {
	if ch.conn.vh == nil {
		return notImplemented(m)
	}
	if ch.conn.cfg.Drain.On() {
		return amqp.NewError(amqp.ConnectionForced, m.ClassID(), m.MethodID(), drainText)
	}
	if m.Immediate {
		// RabbitMQ dropped immediate in 3.0 and closes the connection.
		return amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "immediate=true")
	}
	if err := ch.conn.checkPublish(m); err != nil {
		return err
	}
	if err := ch.conn.checkTopic(permWrite, m.Exchange, m.RoutingKey, m); err != nil {
		return err
	}
	sum, err := amqp.SummarizeProperties(props)
	if err != nil {
		return err
	}
	if err := ch.conn.checkUserID(m, sum.UserID); err != nil {
		return err
	}
	var ttl messageTTL
	if sum.Expiration != "" {
		// RabbitMQ checks the expiration property of every publish and
		// closes the channel over a bad one.
		if ttl.d, ttl.ok, err = queue.ParseExpiration(sum.Expiration); err != nil {
			return amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "%v", err)
		}
	}
	if props, err = ch.rewriteReplyTo(m, props); err != nil {
		return err
	}
	if m.Exchange == "" && vhost.IsReplyName(m.RoutingKey) {
		ch.publishReply(m, props, body, sum)
		return nil
	}
	var cc []string
	if sum.HasHeaders {
		if cc, props, err = vhost.SenderSelected(props); err != nil {
			if e, ok := err.(*amqp.Error); ok {
				// The channel.close names basic.publish, as every other
				// refusal of a publish does.
				e.ClassID, e.MethodID = m.ClassID(), m.MethodID()
			}
			return err
		}
	}
	if ch.conn.vh.PluginExchange(m.Exchange) {
		// A plugin's exchange hands the message to its queues itself:
		// after the publishes before it.
		ch.conn.handOver()
		if ch.publishToPlugin(m, props, body, sum, cc) {
			return nil
		}
	}
	var qs []*vhost.Queue
	ch.routeNames, qs, err = ch.conn.vh.RouteCC(m.Exchange, m.RoutingKey, cc, props, ch.routeNames, ch.routeQueues[:0])
	ch.routeQueues = qs
	if err != nil {
		return err
	}
	if c := ch.conn; c.frames != nil && len(qs) > 0 {
		c.held.published++ // counted at the hand-over, one add a batch
	} else {
		c.cfg.Counters.published(len(qs), m.Mandatory)
	}
	rec := record(m, props, body, sum)
	if ch.tx != nil {
		ch.tx.publish(ch, m, rec, ttl, qs) // stamped when committed
		return nil
	}
	if ch.conn.clocked != nil {
		// Accepted when its bytes arrived, however late it is routed.
		rec.EnqueuedAt = ch.conn.clocked.ReadAt()
	}
	var seq uint64
	if ch.confirm != nil {
		seq = ch.confirm.publish(len(qs))
	}
	if len(qs) == 0 {
		if m.Mandatory {
			ch.returnMessage(m, rec)
		}
		if seq != 0 {
			ch.confirm.stored(ch, seq, false)
		}
		return nil
	}
	var conf queue.Confirmer // a nil interface, not a nil *confirms
	if seq != 0 {
		conf = ch.confirm
	}
	if c := ch.conn; c.frames != nil {
		// The reader hands the publishes of a read over together (held.go).
		handOver := false
		for _, q := range qs {
			if c.held.hold(q, queue.Publishing{Rec: rec, TTL: ttl.queueTTL(), Conf: conf, Seq: seq}) {
				handOver = true
			}
		}
		if handOver {
			c.handOver()
		}
		clear(ch.routeQueues[:len(qs)])
		return nil
	}
	for _, q := range qs {
		if err := ttl.publish(q, rec, conf, seq); err != nil && seq != 0 {
			// The queue was deleted after routing: the message is gone
			// with it, as in RabbitMQ, and the publish is still answered.
			ch.confirm.stored(ch, seq, false)
		}
	}
	clear(ch.routeQueues[:len(qs)])
	return nil
}

// messageTTL is a publish's per-message TTL (the expiration property).
type messageTTL struct {
	d  time.Duration
	ok bool
}

func (t messageTTL) publish(q *vhost.Queue, rec queue.Record, conf queue.Confirmer, seq uint64) error {
	return q.Publish(rec, t.queueTTL(), conf, seq)
}

// queueTTL is t as the queue takes it.
func (t messageTTL) queueTTL() queue.TTL { return queue.TTL{D: t.d, Set: t.ok} }

// decodeScratch holds the methods every message brings, so the reader
// decodes them without an allocation.
type decodeScratch struct {
	publish amqp.BasicPublish
	ack     amqp.BasicAck
}

// scratch returns the channel's decode scratch, allocated by the first
// method that needs it.
func (ch *Channel) scratch() *decodeScratch {
	if ch.decoded == nil {
		ch.decoded = new(decodeScratch)
	}
	return ch.decoded
}

// decodeMethod is amqp.DecodeMethod, but basic.publish and basic.ack are
// decoded into the channel's scratch structs. That is safe because the
// reader is done with a method before it decodes the next one on the
// channel (a publish's content frames come in between, never a method),
// and nothing keeps the pointer: a transaction copies the publish, and the
// rest of the publish and ack paths read the fields while handling them.
func (ch *Channel) decodeMethod(payload []byte) (amqp.Method, error) {
	cls, mth, args, err := amqp.MethodIDs(payload)
	if err != nil {
		return nil, err
	}
	if cls == amqp.ClassBasic {
		switch mth {
		case amqp.MethodBasicPublish:
			// The exchange and routing key stay from the last publish:
			// DecodeArgs overwrites them only when they changed, so a
			// channel publishing to one key allocates no string for it.
			m := &ch.scratch().publish
			*m = amqp.BasicPublish{Exchange: m.Exchange, RoutingKey: m.RoutingKey}
			if err := m.DecodeArgs(args); err != nil {
				return nil, err
			}
			return m, nil
		case amqp.MethodBasicAck:
			m := &ch.scratch().ack
			*m = amqp.BasicAck{}
			if err := m.DecodeArgs(args); err != nil {
				return nil, err
			}
			return m, nil
		}
	}
	return amqp.DecodeMethod(payload)
}

// returnMessage sends basic.return 312 NO_ROUTE; it precedes the publish's
// confirm because both go out on this goroutine in order.
func (ch *Channel) returnMessage(m *amqp.BasicPublish, rec queue.Record) {
	ch.dl.Lock()
	defer ch.dl.Unlock()
	if ch.dl.closed {
		return // nothing follows channel.close (see deliveries.closed)
	}
	ch.emitReturned(m, rec.Properties)
	ch.conn.sendContent(ch.id, &amqp.BasicReturn{
		ReplyCode:  amqp.NoRoute,
		ReplyText:  "NO_ROUTE",
		Exchange:   m.Exchange,
		RoutingKey: m.RoutingKey,
	}, rec.Properties, rec.Body)
}

// confirms is a channel's publisher-confirm state, and the queues'
// Confirmer for its publishes (a pointer, so handing it to a queue
// allocates nothing). Publishes are numbered from 1; a publish is finished
// when every queue it was routed to stored it. Finished publishes are
// answered in order, consecutive acks coalesced into one basic.ack with
// multiple=true, so under load one frame confirms many messages and a
// client sees confirms in publish order.
//
// Sequence numbers are consecutive, so the unanswered ones live in a
// window indexed by seq-answered-1: no map and no allocation per publish.
type confirms struct {
	ch       *Channel
	mu       sync.Mutex
	next     uint64 // last sequence number handed out
	answered uint64 // every seq <= answered has been acked or nacked
	// window[head+i] is publish answered+1+i.
	window []confirmState
	head   int
	ack    amqp.BasicAck // scratch: sendMethod encodes before returning
	nack   amqp.BasicNack
	// queued: the answers are queued without waking the writer, and
	// flushed once (Confirm); set only during that call.
	queued, flush bool
}

type confirmState struct {
	queues int32 // stores still to hear from
	failed bool  // some queue failed to store it: nack
}

var _ queue.Confirmer = (*confirms)(nil)

func newConfirms(ch *Channel) *confirms { return &confirms{ch: ch} }

// Confirm is queue.Confirmer: the queues stored seqs (or failed to).
//
// A nack promises the message was not stored, so that a publisher may
// publish it again without making a duplicate. When the store cannot tell
// (an error matching queue.ErrOutcomeUnknown: the raft leader changed
// while the append was in flight), seqs are left unanswered, which also
// holds back every later confirm of the channel, and the connection is
// closed with 541 INTERNAL_ERROR: the publisher learns that what it has
// not seen confirmed may or may not be stored, as after a lost connection.
// RabbitMQ 4.x quorum queues never nack for a leader change either: their
// client resends to the new leader, deduplicated by sequence number, and
// raises internal_error (a connection exception) when a queue operation
// cannot complete.
func (c *confirms) Confirm(seqs []uint64, err error) {
	if errors.Is(err, queue.ErrOutcomeUnknown) {
		c.ch.conn.closeWith(amqp.NewError(amqp.InternalError, 0, 0,
			"publish outcome unknown: messages not yet confirmed on this connection may or may not be stored (%v)", err))
		return
	}
	c.mu.Lock()
	for _, s := range seqs {
		c.storedLocked(s, err != nil)
	}
	// Answers to a queue's stored batch are flushed as a queue's
	// deliveries are: written by the caller (the queue's goroutine) when
	// the socket takes them at once, instead of waking the writer for
	// one ack.
	c.queued, c.flush = true, false
	c.answerLocked(c.ch)
	c.queued = false
	flush := c.flush
	c.mu.Unlock()
	if flush {
		c.ch.conn.flushQueued()
	}
}

// publish numbers a publish routed to n queues. An unroutable one (n = 0)
// waits for the single stored call handlePublish makes for it.
func (c *confirms) publish(n int) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	if c.head > 0 && c.head == len(c.window) {
		c.window, c.head = c.window[:0], 0 // all answered: start over
	} else if c.head >= 1024 && 2*c.head >= len(c.window) {
		// Reclaim the answered prefix once it is most of the slice.
		n := copy(c.window, c.window[c.head:])
		c.window, c.head = c.window[:n], 0
	}
	c.window = append(c.window, confirmState{queues: int32(max(n, 1))})
	return c.next
}

// stored records that one queue stored seq (or failed to).
func (c *confirms) stored(ch *Channel, seq uint64, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.storedLocked(seq, failed)
	c.answerLocked(ch)
}

func (c *confirms) storedLocked(seq uint64, failed bool) {
	if seq <= c.answered || seq > c.next {
		return // not ours to answer (cannot happen; never panic over it)
	}
	st := &c.window[c.head+int(seq-c.answered-1)]
	st.queues--
	st.failed = st.failed || failed
}

// answerLocked sends acks and nacks for the finished publishes that follow
// the last answered one without a gap.
func (c *confirms) answerLocked(ch *Channel) {
	defer c.countAnswered(ch, c.answered)
	first := c.answered + 1
	for c.head < len(c.window) && c.window[c.head].queues <= 0 {
		failed := c.window[c.head].failed
		c.head++
		c.answered++
		if failed {
			if c.answered > first {
				c.sendAckLocked(ch, c.answered-1, c.answered-1 > first)
			}
			c.nack = amqp.BasicNack{DeliveryTag: c.answered}
			c.sendLocked(ch, &c.nack)
			first = c.answered + 1
		}
	}
	if c.answered >= first {
		c.sendAckLocked(ch, c.answered, c.answered > first)
	}
}

func (c *confirms) sendAckLocked(ch *Channel, tag uint64, multiple bool) {
	c.ack = amqp.BasicAck{DeliveryTag: tag, Multiple: multiple}
	c.sendLocked(ch, &c.ack)
}

// sendLocked sends an ack or nack, queued for Confirm's flush while it
// answers a stored batch.
func (c *confirms) sendLocked(ch *Channel, m amqp.Method) {
	if !c.queued {
		ch.send(m)
		return
	}
	if ch.sendQueued(m) {
		c.flush = true
	}
}

// handleConfirm implements confirm.select.
func (ch *Channel) handleConfirm(m amqp.Method) error {
	sel, ok := m.(*amqp.ConfirmSelect)
	if !ok {
		return serverOnly(m)
	}
	if ch.tx != nil {
		return amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "cannot switch from tx to confirm mode")
	}
	if ch.confirm == nil {
		ch.confirm = newConfirms(ch)
	}
	if !sel.Nowait {
		ch.send(&amqp.ConfirmSelectOk{})
	}
	return nil
}

// txState holds a transaction's work until tx.commit (§1.9: publishes and
// acks are applied only when the transaction commits).
//
// The publishes' bytes count towards the memory alarm (Channel.account)
// until commit hands them to the queues, or rollback or the channel's close
// drops them: a publisher filling an uncommitted transaction is blocked
// like any other once the alarm is raised. RabbitMQ 4.x has no limit of its
// own on a transaction's size either; its uncommitted publishes are channel
// memory, which its watermark counts.
type txState struct {
	publishes []txPublish
	settles   []txSettle
	held      map[uint64]bool // delivery tags settles of this transaction name
	bytes     int64           // message bytes of publishes, counted by the channel
}

type txPublish struct {
	m      amqp.BasicPublish
	rec    queue.Record
	ttl    messageTTL
	queues []*vhost.Queue
	// hold is set for a delayed message (plugins.go): the commit hands
	// it to the delayed service instead of queues.
	hold *vhost.Hold
}

type txSettle struct {
	tag      uint64
	multiple bool
	mode     queue.Outcome
}

func (t *txState) publish(ch *Channel, m *amqp.BasicPublish, rec queue.Record, ttl messageTTL, qs []*vhost.Queue) {
	t.publishes = append(t.publishes, txPublish{m: *m, rec: rec, ttl: ttl, queues: append([]*vhost.Queue(nil), qs...)})
	n := int64(len(rec.Properties) + len(rec.Body))
	t.bytes += n
	ch.account(n)
}

// discard gives back what the transaction's publishes counted and drops
// its work (rollback, the channel's close); commit calls it once the queues
// have the messages.
func (t *txState) discard(ch *Channel) {
	ch.account(-t.bytes)
	t.bytes = 0
	t.publishes, t.settles, t.held = nil, nil, nil
}

// settle checks the tag now, so a bad one fails at once as in RabbitMQ, and
// applies it at commit. A delivery settled earlier in the same transaction
// counts as gone, as RabbitMQ takes it off the channel at once: acking it
// again is an unknown tag (406).
func (t *txState) settle(ch *Channel, tag uint64, multiple bool, mode queue.Outcome) error {
	d := &ch.dl
	d.Lock()
	var tags []uint64
	if !multiple {
		if _, ok := d.unacked.Get(tag); ok && !t.held[tag] {
			tags = append(tags, tag)
		}
	} else if _, ok := d.unacked.Get(tag); tag == 0 || ok && !t.held[tag] {
		// As outside a transaction (takeUnacked): tag itself must be
		// unacked; tag 0 means all of them, even none.
		for u := range d.unacked.All() {
			if tag != 0 && u > tag {
				break // All goes in tag order
			}
			if !t.held[u] {
				tags = append(tags, u)
			}
		}
	}
	d.Unlock()
	if len(tags) == 0 && !(multiple && tag == 0) {
		return unknownTag(tag)
	}
	if t.held == nil {
		t.held = make(map[uint64]bool)
	}
	for _, u := range tags {
		t.held[u] = true
	}
	t.settles = append(t.settles, txSettle{tag: tag, multiple: multiple, mode: mode})
	return nil
}

// txWait counts the stores a commit waits for, and keeps the first store
// error. A queue that refused the message (full, reject-publish) or was
// deleted meanwhile drops it, which a transaction does not report (as in
// RabbitMQ); a store that failed may or may not have stored it.
type txWait struct {
	mu      sync.Mutex
	left    int
	allDone chan struct{}
	err     error
}

func (w *txWait) Confirm(seqs []uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && w.err == nil && !errors.Is(err, queue.ErrRejected) && !errors.Is(err, queue.ErrDeleted) {
		w.err = err
	}
	w.left -= len(seqs)
	if w.left == 0 {
		close(w.allDone)
	}
}

func (ch *Channel) handleTx(ctx context.Context, m amqp.Method) error {
	switch m := m.(type) {
	case *amqp.TxSelect:
		if ch.confirm != nil {
			return amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "cannot switch from confirm to tx mode")
		}
		if ch.tx == nil {
			ch.tx = &txState{}
		}
		ch.send(&amqp.TxSelectOk{})
	case *amqp.TxCommit:
		if ch.tx == nil {
			return amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "channel is not transactional")
		}
		t := ch.tx
		ch.tx = &txState{}
		for _, s := range t.settles {
			ps, err := ch.takeUnacked(s.tag, s.multiple)
			if err == nil {
				ch.apply(ps, s.mode)
			}
		}
		w := &txWait{allDone: make(chan struct{})}
		for _, p := range t.publishes {
			w.left += len(p.queues)
			if p.hold != nil {
				w.left++
			}
		}
		if w.left == 0 {
			close(w.allDone)
		}
		for _, p := range t.publishes {
			if p.hold != nil {
				p.hold.Start(func(err error) { w.Confirm([]uint64{0}, err) })
				continue
			}
			if len(p.queues) == 0 && p.m.Mandatory {
				ch.returnMessage(&p.m, p.rec)
			}
			for _, q := range p.queues {
				if err := p.ttl.publish(q, p.rec, w, 0); err != nil {
					w.Confirm([]uint64{0}, nil)
				}
			}
		}
		t.discard(ch) // the queues have the messages now
		// commit-ok promises the messages are stored (synced when
		// persistent), so wait for the queues; when a store failed it
		// cannot be sent, and the messages may be stored all the same, so
		// the connection is closed as for a publish of unknown outcome.
		select {
		case <-w.allDone:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
		err := w.err
		w.mu.Unlock()
		if err != nil {
			return amqp.NewError(amqp.InternalError, m.ClassID(), m.MethodID(),
				"tx.commit failed: the transaction's messages may or may not be stored (%v)", err)
		}
		ch.send(&amqp.TxCommitOk{})
	case *amqp.TxRollback:
		if ch.tx == nil {
			return amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "channel is not transactional")
		}
		ch.tx.discard(ch)
		ch.tx = &txState{}
		ch.send(&amqp.TxRollbackOk{})
	default:
		return serverOnly(m)
	}
	return nil
}

// checkUserID refuses a publish whose user_id property names another user
// than the connection's, unless that user has the impersonator tag: 406
// PRECONDITION_FAILED in RabbitMQ's words (rabbit_channel's
// check_user_id_header, 3.x and 4.x), so a consumer can trust user_id. A
// direct connection without permission checks (the embedder's own) may set
// any user_id.
func (c *Conn) checkUserID(m *amqp.BasicPublish, claimed string) error {
	if claimed == "" || claimed == c.user || c.access == nil {
		return nil
	}
	if z := c.access.authz; z != nil {
		if slices.Contains(z.Identity.Tags, "impersonator") {
			return nil
		}
	} else if c.cfg.Impersonator != nil && c.cfg.Impersonator(c.user) {
		return nil
	}
	return amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(),
		"user_id property set to '%s' but authenticated user was '%s'", claimed, c.user)
}
