package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// ErrDeleted is returned by calls on a queue whose actor has stopped, because
// the queue was deleted or the broker is shutting down.
var ErrDeleted = errors.New("queue: deleted")

// Stores are the three stores a queue works on. A non-durable queue gets
// in-memory ones, a durable queue the broker's persistent ones.
type Stores struct {
	Shards  storage.ShardStore
	Cursors meta.Cursors
	Index   unacked.Index
}

// Config describes one queue.
type Config struct {
	VHost string
	Name  string
	// Shard is the queue's shard name in Stores.Shards.
	Shard  string
	Stores Stores
	// DropTransient deletes non-persistent records when the queue starts:
	// RabbitMQ drops transient messages of durable queues on restart.
	DropTransient bool
	// Broker and Incarnation identify this node's run in index entries.
	Broker      string
	Incarnation uint64
	// Clock timestamps messages and runs the TTL and x-expires timers;
	// nil means clock.Real.
	Clock  clock.Clock
	Logger *slog.Logger
	// Features are the queue's x-arguments and its hooks into the vhost
	// (features.go); the zero value is a plain classic queue.
	Features
	// Totals, when set, counts every queue's messages too (inspect.go).
	Totals *Counters
	// Events, when set, receives the queue's dead-lettered and expired
	// messages (deadletter.go). nil reports nothing.
	Events *events.Hub
	// OwnCursor says that nobody else deletes the queue's cursor from
	// Stores.Cursors: a non-durable queue's in-memory stores hold no
	// topology. Delete then removes it (through DeleteQueue, when
	// Cursors has one), or every queue ever deleted would leave its cursor
	// behind. A durable queue's cursor goes with its metadata, which the
	// caller deletes.
	OwnCursor bool
	// Shared runs the queue in shared mode (shared.go, doc.go): other
	// brokers' actors serve the same queue from the same stores, every
	// claim is an unacked.Claimer claim, and the caller feeds the store's
	// changes to Observe. Start fails unless Stores.Index is an
	// unacked.Claimer. The broker sets DropTransient false with it.
	Shared bool
}

// Owner identifies who holds a delivery: a channel of a connection.
type Owner struct {
	Connection string
	Channel    uint16
}

// Message is one claimed message, handed to a consumer or a basic.get.
type Message struct {
	storage.Record
	Redelivered bool
	// DeliveryCount counts deliveries of this message, this one included.
	DeliveryCount uint32
	// Ref settles the message with Ack, Reject or Requeue.
	Ref Ref
}

// Ref names one delivery of a message. Settling with a stale Ref (the
// message was requeued or settled meanwhile) does nothing: whoever settles a
// delivery first owns the message.
type Ref struct {
	Offset uint64
	Claim  uint64
}

// Receiver is what a consumer's channel implements.
type Receiver interface {
	// Deliver hands m to consumer c. It runs on the queue's goroutine, so it
	// must not wait on the queue. It returns false when the consumer cannot
	// take messages any more (its channel is closing): the queue then returns
	// the message in place and drops the consumer.
	Deliver(c *Consumer, m Message) bool
	// Cancelled tells the consumer that the queue dropped it because the
	// queue was deleted.
	Cancelled(c *Consumer)
}

// Consumer is a basic.consume subscription.
type Consumer struct {
	Tag       string
	Owner     Owner
	NoAck     bool
	Exclusive bool
	// Priority is the consumer priority (x-priority on basic.consume):
	// higher ones get messages first while they have credit.
	Priority int32
	// Credit is the consumer's prefetch (basic.qos global=false) and
	// ChannelCredit the channel's (global=true); either may be nil.
	Credit        *Credit
	ChannelCredit *Credit
	Receiver      Receiver

	room  Roomer        // Receiver's Roomer, if it is one; set when registered
	links consumerLinks // its place among the queue's consumers (consumers.go)
}

// Roomer is implemented by Receivers whose connection has a bounded write
// buffer. HasRoom runs on the queue's goroutine before a delivery: false
// skips the consumer as if it had no credit, and the receiver must Kick the
// queue once there is room again. So a client that stops reading holds a
// bounded amount of broker memory, and the queue never waits for it.
type Roomer interface {
	HasRoom(c *Consumer) bool
}

func (c *Consumer) acquire() bool {
	if c.room != nil && !c.room.HasRoom(c) {
		return false
	}
	if c.NoAck {
		return true // prefetch does not apply to no-ack consumers
	}
	if c.Credit != nil && !c.Credit.Acquire() {
		return false
	}
	if c.ChannelCredit != nil && !c.ChannelCredit.Acquire() {
		if c.Credit != nil {
			c.Credit.Release(1)
		}
		return false
	}
	return true
}

func (c *Consumer) release() {
	if c.NoAck {
		return
	}
	if c.Credit != nil {
		c.Credit.Release(1)
	}
	if c.ChannelCredit != nil {
		c.ChannelCredit.Release(1)
	}
}

// Confirmer learns when published messages are stored (err nil) or failed.
// Confirm runs on the queue's goroutine and must not wait on the queue. One
// call carries every sequence number of one store batch, in publish order,
// so the channel can answer with a single basic.ack multiple=true.
type Confirmer interface {
	Confirm(seqs []uint64, err error)
}

// Stats are a queue's counts.
type Stats struct {
	Ready     uint64
	Unacked   uint64
	Consumers int
}

// ErrExclusiveConsumer and ErrConsumersExist are returned by Consume when an
// exclusive consumer is requested or present (the channel answers 403).
var (
	ErrExclusiveConsumer = errors.New("queue: queue has an exclusive consumer")
	ErrConsumersExist    = errors.New("queue: queue already has consumers")
)

type opKind uint8

const (
	opPublish opKind = iota
	opConsume
	opCancel
	opGet
	opAck
	opReject
	opRequeue
	opRequeueEntries
	opPurge
	opStats
	opDelete
	opInspect
	opTimer        // a TTL or x-expires timer fired (features.go)
	opDeadLettered // every target stored a dead-lettered copy
	opTouch        // the queue was redeclared: it is in use
	opUnused       // is the queue unused for x-expires?
)

type op struct {
	kind     opKind
	rec      storage.Record
	conf     Confirmer
	seq      uint64
	consumer *Consumer
	tag      string
	owner    Owner
	noAck    bool
	refs     []Ref
	ref      [1]Ref // a single settle, sent without a slice (see settleOne)
	one      bool
	entries  []unacked.Entry
	inspect  func(context.Context) // opInspect: runs on the actor (inspect.go)
	ttl      time.Duration         // opPublish: per-message TTL when hasTTL
	hasTTL   bool
	failed   bool // opDeadLettered: some target failed to store the copy
	reply    chan reply
}

type reply struct {
	msg   Message
	ok    bool
	n     uint64
	stats Stats
	err   error
}

// delivery is a message that is out: delivered and not yet settled.
type delivery struct {
	rec      storage.Record
	claim    uint64
	owner    Owner
	count    uint32
	consumer *Consumer // nil for basic.get
}

// waiting is a message requeued in place, served before the cursor.
type waiting struct {
	rec   storage.Record
	count uint32
	// lazy: rec is not loaded yet (shared mode: a message another broker
	// requeued); it is read from the shard when needed (loadHead).
	lazy bool
}

// Queue is one queue's actor. Its exported methods are safe for concurrent
// use; all state below the channels is owned by the actor goroutine.
type Queue struct {
	cfg  Config
	key  meta.QueueKey
	mbox mailbox // calls to the actor (mailbox.go)
	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	stopOnce sync.Once
	// quiet is closed when the stopping actor has drained its mailbox,
	// finish when its stopper lets it close its inbox and exit (StopAll).
	quiet      chan struct{}
	quietOnce  sync.Once
	finish     chan struct{}
	finishOnce sync.Once
	// group counts the dead-lettering in flight among the queues of this
	// one's vhost (Group); leavingN counts this queue's leaving messages.
	group    *Group
	leavingN Group
	stepOps  int          // inbox ops taken in this step, given back by endStep
	closing  atomic.Bool  // set by the actor when it stops taking ops
	work     sync.Mutex   // held while the actor's state is worked on
	queued   atomic.Int64 // ops sent to the mailbox and not yet handled
	// requeuing counts requeue ops sent but not yet handled. A channel
	// requeues before it frees the prefetch credit the delivery held, so a
	// dispatch that finds credit and a requeue on its way stops and lets the
	// run loop handle the requeue first: the freed credit then serves the
	// requeued message at the head, not the next one from the cursor.
	requeuing atomic.Int32

	// Owned by the actor goroutine.
	cursor     uint64           // next offset to claim from the shard
	fromCursor uint64           // live records at offsets >= cursor
	pending    []storage.Record // a prefix of those records, read or appended
	returned   []uint64         // requeued offsets, ascending
	waiting    map[uint64]waiting
	out        map[uint64]*delivery // from newDelivery: no allocation per delivery
	consumers  consumerSet
	claims     uint64
	publishes  []storage.Record
	// pendingArr is the array pending was last moved into (appendPending),
	// full length; kept while small once pending empties (emptyPending).
	pendingArr []storage.Record
	confirms   []confirm
	acks       []Ref // acks gathered from the mailbox, settled together
	// A batch holding persistent records is appended by a committer
	// goroutine (startCommit), so the actor keeps delivering and settling
	// while the store syncs. At most one is in flight: batches are stored
	// and confirmed in publish order. commitDone carries its outcome back.
	committing bool
	commitDone chan commitResult
	spare      struct { // the previous batch's slices, reused
		recs     []storage.Record
		confirms []confirm
	}
	seqs   []uint64 // scratch for Confirm calls
	retry  *time.Timer
	retryC <-chan time.Time
	// Work a store error left undone, redone when the retry timer fires:
	// settles whose record delete failed (the deliveries stay in out),
	// index entries of settled messages whose delete failed, requeues
	// whose index write failed (the deliveries stay in out), and a ready
	// count to take again after an Append failed (its records may or may
	// not be stored).
	// scratch holds the actor's reusable slices, so a claim, a settle or a
	// requeue allocates nothing per message in the steady state. None of
	// them is kept past the call that fills it: the stores copy what they
	// keep.
	scratch struct {
		batch   []assignment
		entries []unacked.Entry
		offsets []uint64
		keys    []unacked.Key
		live    []*delivery
	}
	// Deliveries are carved from slabs and recycled through a free list:
	// one allocation per 64 deliveries instead of one each.
	deliverySlab   []delivery
	freeDeliveries []*delivery
	retrySettle    []Ref
	retryKeys      []unacked.Key
	retryRequeue   []Ref
	recount        bool
	deleted        bool
	// inbox is the non-blocking mailbox (features.go): dead-lettered
	// copies from other actors, their confirms and timer firings.
	inbox struct {
		sync.Mutex
		ops     []op
		closed  bool
		deleted bool // closed because the queue was deleted
	}
	inboxLen atomic.Int32
	shared   sharedState  // shared mode only (shared.go)
	feat     featureState // owned by the actor (features.go)
	counters Counters     // message counters, read from any goroutine (inspect.go)
}

type confirm struct {
	conf Confirmer
	seq  uint64
}

// commitResult is a committer's outcome: the batch it appended and the
// Append error.
type commitResult struct {
	recs     []storage.Record
	confirms []confirm
	err      error
}

const (
	// maxPending bounds the records kept in memory ahead of the cursor.
	maxPending = 4096
	// maxBatch bounds the messages claimed with one CAS.
	maxBatch = 256
	// maxMailbox bounds the ops waiting in the actor's mailbox; a full
	// mailbox blocks publishers, which is the broker's back-pressure.
	maxMailbox = 1024
	// maxBacklog bounds the publishes gathered while a commit is in
	// flight: beyond it the actor waits for the commit, so the mailbox
	// fills and publishers are held back again.
	maxBacklog = 4 * maxBatch
	// retryAfter is how long the actor waits after a store error.
	retryAfter = 100 * time.Millisecond
)

// Start recovers the queue from its stores and starts its actor. Index
// entries left by an earlier run are returned in place (redelivered=true);
// entries for offsets the cursor never passed are dropped, because their
// claim never committed.
func Start(ctx context.Context, cfg Config) (*Queue, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Features.Args == (Args{}) {
		// The zero Args would mean limits of 0: a queue declared without
		// arguments is what ParseArgs(nil) says.
		cfg.Features.Args, _ = ParseArgs(nil)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	q := &Queue{
		cfg:     cfg,
		key:     meta.QueueKey{VHost: cfg.VHost, Name: cfg.Name},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		quiet:   make(chan struct{}),
		finish:  make(chan struct{}),
		group:   cfg.Features.Group,
		waiting: make(map[uint64]waiting),
		out:     make(map[uint64]*delivery),

		commitDone: make(chan commitResult, 1),
	}
	if q.group == nil {
		q.group = NewGroup()
	}
	if cfg.Shared {
		c, ok := cfg.Stores.Index.(unacked.Claimer)
		if !ok {
			return nil, fmt.Errorf("queue: %s: shared mode needs an unacked.Claimer index, %T is not one", cfg.Name, cfg.Stores.Index)
		}
		q.shared.claimer = c
	}
	if err := q.recover(ctx); err != nil {
		return nil, fmt.Errorf("queue: recover %s: %w", cfg.Name, err)
	}
	q.initFeatures()
	go q.run()
	return q, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.cfg.Name }

// VHost returns the queue's vhost.
func (q *Queue) VHost() string { return q.cfg.VHost }

func (q *Queue) recover(ctx context.Context) error {
	if q.cfg.Shared {
		return q.recoverShared(ctx)
	}
	s := q.cfg.Stores
	cursor, err := s.Cursors.Offset(ctx, q.key)
	if err != nil {
		return err
	}
	// A cursor beyond an empty shard's next offset belongs to an earlier
	// queue of this name; without the reset new messages would be skipped.
	if total, err := s.Shards.Count(ctx, q.cfg.Shard); err == nil && total == 0 {
		next, err := s.Shards.FirstOffset(ctx, q.cfg.Shard)
		if err != nil {
			return err
		}
		if cursor > next {
			if _, err := s.Cursors.CompareAndSwapOffset(ctx, q.key, cursor, next); err != nil {
				return err
			}
			cursor = next
		}
	}
	q.cursor = cursor
	if q.cfg.DropTransient {
		if err := q.eachRecord(ctx, 0, ^uint64(0), func(batch []storage.Record) error {
			var drop []uint64
			for _, r := range batch {
				if !r.Persistent {
					drop = append(drop, r.Offset)
				}
			}
			if len(drop) == 0 {
				return nil
			}
			return s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, drop)
		}); err != nil {
			return err
		}
	}
	var entries []unacked.Entry
	if err := s.Index.Queue(ctx, q.cfg.VHost, q.cfg.Name, func(e unacked.Entry) bool {
		entries = append(entries, e)
		return true
	}); err != nil {
		return err
	}
	// Below the cursor every live record must have an index entry (the
	// entry is written before the cursor moves). Records without one were
	// settled by a no-ack delivery that crashed before deleting them.
	claimed := make(map[uint64]unacked.Entry, len(entries))
	var stale []unacked.Key
	for _, e := range entries {
		if e.Offset >= cursor {
			stale = append(stale, e.Key) // the claim's CAS never happened
			continue
		}
		claimed[e.Offset] = e
	}
	var orphans []uint64
	var back []unacked.Entry
	if err := q.eachRecord(ctx, 0, cursor, func(batch []storage.Record) error {
		for _, r := range batch {
			e, ok := claimed[r.Offset]
			if !ok {
				orphans = append(orphans, r.Offset)
				continue
			}
			delete(claimed, r.Offset)
			q.waiting[r.Offset] = waiting{rec: r, count: e.DeliveryCount}
			q.returned = append(q.returned, r.Offset)
			if e.State != unacked.Returned {
				e.State = unacked.Returned
				back = append(back, e)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, e := range claimed { // entries whose record is gone: settled before a crash
		stale = append(stale, e.Key)
	}
	if len(orphans) > 0 {
		if err := s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, orphans); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		if err := s.Index.Delete(ctx, stale); err != nil {
			return err
		}
	}
	if len(back) > 0 {
		if err := s.Index.Put(ctx, back); err != nil {
			return err
		}
	}
	total, err := s.Shards.Count(ctx, q.cfg.Shard)
	if err != nil {
		return err
	}
	q.fromCursor = total - uint64(len(q.returned))
	if q.prioritized() {
		slices.SortFunc(q.returned, q.cmpReturned)
	}
	return nil
}

// eachRecord calls fn with batches of the live records in [from, to).
func (q *Queue) eachRecord(ctx context.Context, from, to uint64, fn func([]storage.Record) error) error {
	for from < to {
		batch, err := q.cfg.Stores.Shards.Read(ctx, q.cfg.Shard, from, 1024)
		if err != nil {
			return err
		}
		n := 0
		for n < len(batch) && batch[n].Offset < to {
			n++
		}
		if n == 0 {
			return nil
		}
		if err := fn(batch[:n]); err != nil {
			return err
		}
		if n < len(batch) {
			return nil
		}
		from = batch[n-1].Offset + 1
	}
	return nil
}

// send posts o to the actor, or fails when the actor is stopping: every
// op the mailbox took is handled or answered (drainMailbox), so no
// publish is left without its confirm.
func (q *Queue) send(o op) error {
	if q.closing.Load() {
		return ErrDeleted
	}
	requeue := o.kind == opRequeue || o.kind == opRequeueEntries
	if requeue {
		q.requeuing.Add(1) // before the send, so before the caller frees credit
	}
	q.queued.Add(1)
	first, ok := q.mbox.put(&o)
	if !ok {
		q.queued.Add(-1)
		if requeue {
			q.requeuing.Add(-1)
		}
		return ErrDeleted
	}
	if first {
		q.Kick()
	}
	return nil
}

// inline runs o on the calling goroutine instead of the actor's, when the
// actor is idle and nothing is queued ahead of o: a basic.get round trip
// then costs no thread wake-up for the hop to the actor and back, which on
// a small machine is most of its price (README, Performance). The work
// mutex makes the caller the actor's state's one owner for the duration,
// and an empty mailbox and inbox under it mean every op sent before o has
// been handled, so o sees what it would have seen in the mailbox. Shared
// mode keeps the mailbox: its answers wait on observed changes.
func (q *Queue) inline(o op) (reply, bool) {
	if q.cfg.Shared || !q.work.TryLock() {
		return reply{}, false
	}
	defer q.work.Unlock()
	// A batch being committed is the actor's to finish: it waits for the
	// outcome on commitDone too, and had it taken it while we hold work,
	// neither of us would go on.
	if q.queued.Load() != 0 || q.inboxLen.Load() != 0 || q.closing.Load() || q.deleted || q.committing {
		return reply{}, false
	}
	ctx := context.Background()
	retrying := q.retryC != nil
	r := q.exec(ctx, o)
	q.afterOps(ctx)
	if !retrying && q.retryC != nil {
		// A store error scheduled a retry: the actor, asleep in a select
		// that predates the timer, must wake to wait on it.
		q.Kick()
	}
	return r, true
}

// call posts o and waits for the actor's reply.
func (q *Queue) call(ctx context.Context, o op) (reply, error) {
	o.reply = make(chan reply, 1)
	if err := q.send(o); err != nil {
		return reply{}, err
	}
	select {
	case r := <-o.reply:
		return r, r.err
	case <-q.done:
		// The actor may have answered just before it stopped.
		select {
		case r := <-o.reply:
			return r, r.err
		default:
			return reply{}, ErrDeleted
		}
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

// Publish enqueues rec. When conf is non-nil, conf.Confirm(seq, err) runs once
// the record is stored (synced first when it is persistent and the store is
// durable). Publish blocks while the mailbox is full: that is back-pressure.
func (q *Queue) Publish(rec storage.Record, conf Confirmer, seq uint64) error {
	return q.send(op{kind: opPublish, rec: rec, conf: conf, seq: seq})
}

// Consume registers c. It fails with ErrExclusiveConsumer or
// ErrConsumersExist as basic.consume's exclusive flag requires.
func (q *Queue) Consume(ctx context.Context, c *Consumer) error {
	_, err := q.call(ctx, op{kind: opConsume, consumer: c})
	return err
}

// Cancel removes the consumer with tag held by owner and returns the number
// of consumers left. No Deliver for it runs after Cancel returns. Messages
// it holds stay unacked: basic.cancel requeues nothing.
func (q *Queue) Cancel(ctx context.Context, owner Owner, tag string) (int, error) {
	r, err := q.call(ctx, op{kind: opCancel, owner: owner, tag: tag})
	return r.stats.Consumers, err
}

// Get claims one message for basic.get. ok is false when the queue has no
// ready message. ready is the count left after the claim (get-ok's
// message-count). With noAck the message is settled at once. When the actor
// is idle Get runs on the caller's goroutine (inline), deliveries to
// consumers included, so the caller must hold no lock a Deliver could need.
func (q *Queue) Get(ctx context.Context, owner Owner, noAck bool) (m Message, ready uint64, ok bool, err error) {
	o := op{kind: opGet, owner: owner, noAck: noAck}
	if r, done := q.inline(o); done {
		return r.msg, r.stats.Ready, r.ok, r.err
	}
	r, err := q.call(ctx, o)
	return r.msg, r.stats.Ready, r.ok, err
}

// Ack settles deliveries: their records and index entries are deleted.
func (q *Queue) Ack(refs []Ref) error {
	return q.send(op{kind: opAck, refs: refs})
}

// Reject settles deliveries without requeue: they are discarded.
func (q *Queue) Reject(refs []Ref) error {
	return q.send(op{kind: opReject, refs: refs})
}

// AckOne, RejectOne and RequeueOne are Ack, Reject and Requeue of a single
// delivery, the common case of basic.ack without multiple; they allocate
// nothing.
func (q *Queue) AckOne(r Ref) error { return q.settleOne(opAck, r) }

// RejectOne is Reject of one delivery.
func (q *Queue) RejectOne(r Ref) error { return q.settleOne(opReject, r) }

// RequeueOne is Requeue of one delivery.
func (q *Queue) RequeueOne(r Ref) error { return q.settleOne(opRequeue, r) }

// AckNow is AckOne for a caller about to wait on the queue again (the ack
// of a basic.get before the next get): when the actor is idle it settles
// on the calling goroutine, so, as for Get, the caller must hold no lock a
// Deliver could need.
func (q *Queue) AckNow(r Ref) error {
	o := op{kind: opAck, ref: [1]Ref{r}, one: true}
	if _, done := q.inline(o); done {
		return nil
	}
	return q.send(o)
}

func (q *Queue) settleOne(kind opKind, r Ref) error {
	return q.send(op{kind: kind, ref: [1]Ref{r}, one: true})
}

// Requeue returns deliveries in place: the single requeue primitive behind
// nack and reject with requeue, basic.recover, and channel or connection
// close. Each message keeps its position and comes back redelivered.
func (q *Queue) Requeue(refs []Ref) error {
	return q.send(op{kind: opRequeue, refs: refs})
}

// RequeueEntries returns the deliveries named by index entries whose owner
// is gone: the scanner's call into the same primitive. An entry whose
// delivery is no longer out with that owner is ignored.
func (q *Queue) RequeueEntries(entries []unacked.Entry) error {
	return q.send(op{kind: opRequeueEntries, entries: entries})
}

// Purge deletes the ready messages (not those out for delivery) and returns
// how many.
func (q *Queue) Purge(ctx context.Context) (uint64, error) {
	r, err := q.call(ctx, op{kind: opPurge})
	return r.n, err
}

// Stats returns the queue's counts, after every earlier call on it.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	r, err := q.call(ctx, op{kind: opStats})
	return r.stats, err
}

// Delete removes every message, index entry and the shard, cancels the
// consumers (Receiver.Cancelled), stops the actor and returns the number of
// ready messages deleted. The cursor is the caller's to delete with the
// queue's metadata.
func (q *Queue) Delete(ctx context.Context) (uint64, error) {
	r, err := q.call(ctx, op{kind: opDelete})
	return r.n, err
}

// Kick wakes the actor to retry delivery, for example after a channel
// settled messages and so freed prefetch credit. It never blocks.
func (q *Queue) Kick() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Done is closed when the actor has stopped.
func (q *Queue) Done() <-chan struct{} { return q.done }

func (q *Queue) run() {
	ctx := context.Background()
	defer close(q.done)
	defer q.drain(ctx)
	defer func() {
		if q.retry != nil {
			q.retry.Stop()
		}
	}()
	// The retry timer's channel changes under work (an in-place op may
	// schedule a retry), so the select waits on a copy taken under it.
	q.work.Lock()
	retryC := q.retryC
	q.work.Unlock()
	for {
		select {
		case <-q.kick:
			// A send into an empty mailbox kicks, and so does a channel
			// that freed credit: either way everything waiting is taken,
			// so publishes go to the store in one batch and deliveries in
			// one claim.
			q.work.Lock()
			q.handleMailbox(ctx)
		case r := <-q.commitDone:
			q.work.Lock()
			q.finishCommit(ctx, r)
		case <-retryC:
			q.work.Lock()
			q.retryC = nil
			q.redo(ctx)
		case <-q.stop:
			q.work.Lock() // held for good: quiesce and drain follow
			q.quiesce(ctx)
			return
		}
		if q.inboxLen.Load() > 0 && !q.deleted {
			q.drainInbox(ctx)
		}
		if q.deleted {
			return // holding work: nothing runs inline any more
		}
		if q.cfg.Shared {
			q.applyObserved(ctx)
		}
		q.afterOps(ctx)
		q.endStep()
		retryC = q.retryC
		q.work.Unlock()
	}
}

// handleMailbox handles every op waiting in the mailbox. After a delete
// the rest are answered as drainMailbox answers them.
func (q *Queue) handleMailbox(ctx context.Context) {
	chunks := q.mbox.take(false)
	for c := chunks; c != nil; c = c.next {
		for i := range c.n {
			if q.deleted {
				q.refuse(ctx, &c.ops[i])
			} else {
				q.handle(ctx, c.ops[i])
			}
			q.queued.Add(-1)
		}
	}
	freeChunks(chunks)
}

// afterOps is what follows every batch of ops, on the actor or inline:
// gathered acks settled, a commit started, deliveries made.
func (q *Queue) afterOps(ctx context.Context) {
	q.flushAcks(ctx)
	q.startCommit(ctx)
	q.dispatch(ctx)
	q.afterDispatch(ctx)
}

// drain is the actor's last step: the mailbox is drained (if quiesce did
// not already), the inbox closed (publishes in it are stored, or dropped
// after a delete) and the last publishes stored. Leaving messages still
// waiting for a target's answer stay in the store as they are.
func (q *Queue) drain(ctx context.Context) {
	q.drainMailbox(ctx)
	q.quietOnce.Do(func() { close(q.quiet) })
	q.flushAcks(ctx)
	q.closeInbox(ctx)
	q.flushPublishes(ctx)
	q.endStep()
	q.dropLeaving()
	q.release()
}

// release lets go of everything the stopped actor held in memory. A
// stopped queue may stay reachable for a while (a channel keeps the Queue
// of its unacked deliveries until they are settled or the channel
// closes), and should cost no more than its struct meanwhile.
func (q *Queue) release() {
	q.pending, q.pendingArr, q.returned = nil, nil, nil
	q.waiting, q.out = nil, nil
	q.publishes, q.confirms, q.acks, q.seqs = nil, nil, nil, nil
	q.spare.recs, q.spare.confirms = nil, nil
	q.scratch.batch, q.scratch.entries, q.scratch.offsets, q.scratch.keys, q.scratch.live = nil, nil, nil, nil, nil
	q.deliverySlab, q.freeDeliveries = nil, nil
	q.retrySettle, q.retryKeys, q.retryRequeue = nil, nil, nil
	q.consumers.reset()
}

// flushAcks settles the acks gathered by handle, in one settle.
func (q *Queue) flushAcks(ctx context.Context) {
	if len(q.acks) == 0 {
		return
	}
	q.settle(ctx, q.acks)
	q.acks = q.acks[:0]
}

// handle executes o and answers its caller, if one waits.
func (q *Queue) handle(ctx context.Context, o op) {
	r := q.exec(ctx, o)
	if o.reply != nil {
		o.reply <- r
	}
}

// exec executes o and returns its answer.
func (q *Queue) exec(ctx context.Context, o op) reply {
	// A single settle's ref moves to a local array: assigned into o it
	// would go to the heap with o (o.rec is appended to publishes).
	var one [1]Ref
	refs := o.refs
	if o.one {
		one = o.ref
		refs = one[:]
	}
	q.countOp(&o)
	if o.kind == opPublish {
		if o.hasTTL || q.cfg.Features.Args.HasMessageTTL {
			o.rec.ExpiresAt = q.expiry(o)
		}
		q.publishes = append(q.publishes, o.rec)
		q.confirms = append(q.confirms, confirm{conf: o.conf, seq: o.seq})
		if len(q.publishes) >= maxBatch {
			if q.committing && len(q.publishes) >= maxBacklog {
				q.awaitCommit(ctx)
			}
			q.startCommit(ctx)
		}
		return reply{}
	}
	if o.kind == opAck {
		// Acks are gathered and settled with one record delete and one
		// index delete per mailbox drain (flushAcks). They need not wait
		// for the publishes before them: a delivered message was stored
		// before it went out, and acking it changes no ready count.
		q.acks = append(q.acks, refs...)
		if len(q.acks) >= maxBatch {
			q.flushAcks(ctx)
		}
		return reply{}
	}
	// Everything else sees the acks and publishes that came before it: the
	// first settle of a delivery wins, so an ack must not be overtaken.
	q.flushAcks(ctx)
	q.flushPublishes(ctx)
	if q.cfg.Shared {
		// Answers (Stats, Get, Purge) reflect every change observed so far.
		q.applyObserved(ctx)
	}
	var r reply
	switch o.kind {
	case opConsume:
		r.err = q.addConsumer(o.consumer)
		q.used()
	case opCancel:
		q.removeConsumer(o.owner, o.tag)
		r.stats.Consumers = q.consumers.len()
		q.used()
	case opGet:
		q.used()
		r.msg, r.ok, r.err = q.get(ctx, o.owner, o.noAck)
		r.stats = q.stats()
	case opAck:
		q.settle(ctx, refs)
	case opReject:
		q.reject(ctx, refs)
	case opRequeue:
		q.requeue(ctx, refs)
		q.requeuing.Add(-1)
	case opRequeueEntries:
		defer q.requeuing.Add(-1)
		var refs []Ref
		var foreign []unacked.Entry
		for _, e := range o.entries {
			d, ok := q.out[e.Offset]
			if ok && d.owner == (Owner{Connection: e.Connection, Channel: e.Channel}) {
				refs = append(refs, Ref{Offset: e.Offset, Claim: d.claim})
			} else if !ok && q.cfg.Shared {
				foreign = append(foreign, e)
			}
		}
		q.requeue(ctx, refs)
		if len(foreign) > 0 {
			q.returnForeign(ctx, foreign)
		}
	case opPurge:
		if q.cfg.Shared {
			r.n, r.err = q.purgeShared(ctx)
		} else {
			r.n, r.err = q.purge(ctx)
		}
	case opStats:
		r.stats = q.stats()
	case opDelete:
		r.n, r.err = q.deleteAll(ctx)
	case opInspect:
		o.inspect(ctx)
	case opTimer:
		q.expireHead(ctx)
	case opDeadLettered:
		q.deadLettered(ctx, o.seq, o.failed)
	case opTouch:
		q.used()
	case opUnused:
		r.ok = q.unused()
	}
	return r
}

func (q *Queue) stats() Stats {
	return Stats{
		Ready:     q.fromCursor + uint64(len(q.returned)),
		Unacked:   uint64(len(q.out)),
		Consumers: q.consumers.len(),
	}
}

func (q *Queue) ready() uint64 { return q.fromCursor + uint64(len(q.returned)) }

func (q *Queue) addConsumer(c *Consumer) error {
	if q.consumers.exclusive > 0 {
		return ErrExclusiveConsumer
	}
	if c.Exclusive && q.consumers.len() > 0 {
		return ErrConsumersExist
	}
	q.addConsumerSorted(c)
	return nil
}

func (q *Queue) removeConsumer(owner Owner, tag string) {
	q.consumers.remove(owner, tag)
}

// flushPublishes stores the gathered publishes and confirms them before it
// returns, after the commit in flight if there is one: what the actor does
// next sees every publish that came before it.
func (q *Queue) flushPublishes(ctx context.Context) {
	q.awaitCommit(ctx)
	if !q.preparePublishes(ctx) {
		return
	}
	_, err := q.cfg.Stores.Shards.Append(ctx, q.cfg.Shard, q.publishes)
	q.stored(ctx, q.publishes, q.confirms, err)
	clear(q.publishes) // drop references to bodies
	q.publishes = q.publishes[:0]
	clear(q.confirms)
	q.confirms = q.confirms[:0]
}

// startCommit stores the gathered publishes without waiting when the
// batch holds a persistent record and the store syncs (it implements
// storage.Syncer): a committer goroutine appends it while the actor goes
// on delivering and settling, and finishCommit confirms it once the sync
// has landed. The records become ready only then, so nothing is delivered
// before it is durable, and the claim order (index entries, then cursor)
// only ever covers stored records. Other batches (transient, in-memory
// stores, queues with length limits, which count the ready messages at
// append time) are stored at once by flushPublishes. With a commit in
// flight it does nothing: the batch grows until that commit returns.
func (q *Queue) startCommit(ctx context.Context) {
	if q.committing || len(q.publishes) == 0 {
		return
	}
	if _, syncs := q.cfg.Stores.Shards.(storage.Syncer); !syncs || q.feat.limited || !anyPersistent(q.publishes) {
		q.flushPublishes(ctx)
		return
	}
	if !q.preparePublishes(ctx) {
		return
	}
	recs, confirms := q.publishes, q.confirms
	q.publishes, q.confirms = q.spare.recs[:0], q.spare.confirms[:0]
	q.spare.recs, q.spare.confirms = nil, nil
	q.committing = true
	shards, shard, done := q.cfg.Stores.Shards, q.cfg.Shard, q.commitDone
	go func() {
		_, err := shards.Append(ctx, shard, recs)
		done <- commitResult{recs: recs, confirms: confirms, err: err}
	}()
}

// awaitCommit waits for the commit in flight, if any, and finishes it.
func (q *Queue) awaitCommit(ctx context.Context) {
	if q.committing {
		q.finishCommit(ctx, <-q.commitDone)
	}
}

// finishCommit applies a committer's outcome as flushPublishes applies an
// Append's, and keeps its slices for the next batch.
func (q *Queue) finishCommit(ctx context.Context, r commitResult) {
	q.committing = false
	q.stored(ctx, r.recs, r.confirms, r.err)
	clear(r.recs)
	clear(r.confirms)
	if cap(r.recs) <= maxBatch { // a backlog's larger slices are let go
		q.spare.recs, q.spare.confirms = r.recs[:0], r.confirms[:0]
	}
}

// maxPendingSpare bounds the array emptyPending keeps: enough for the
// small batches of a queue whose consumers keep up, little for a queue
// that goes quiet.
const maxPendingSpare = maxBatch

// appendPending appends recs to pending. Claims take records from the
// front of pending, so its backing array (pendingArr) empties from the
// front while appends fill it at the back: when the back is full, the live
// records move to the front of the same array when they fit, instead of
// append allocating a new array for every window of records.
func (q *Queue) appendPending(recs []storage.Record) {
	if need := len(q.pending) + len(recs); need > cap(q.pending) {
		arr := q.pendingArr
		if cap(arr) < need {
			// Small at first: an idle queue holding a message or two
			// keeps this array.
			arr = make([]storage.Record, max(2*need, 4))
		}
		k := copy(arr, q.pending) // memmove: q.pending may be within arr
		clear(arr[k:])            // consumed and moved-from records: let the bodies go
		q.pendingArr = arr
		q.pending = arr[:k]
	}
	q.pending = append(q.pending, recs...)
}

// emptyPending empties pending once its records are all claimed. A small
// backing array is kept (cleared: the bodies go) for the next batch, so a
// queue whose consumers keep up does not allocate one per batch; a larger
// one is let go.
func (q *Queue) emptyPending() {
	q.pending = nil
	if cap(q.pendingArr) > maxPendingSpare {
		q.pendingArr = nil
		return
	}
	clear(q.pendingArr)
	q.pending = q.pendingArr[:0]
}

func anyPersistent(recs []storage.Record) bool {
	for i := range recs {
		if recs[i].Persistent {
			return true
		}
	}
	return false
}

// preparePublishes stamps the gathered publishes and applies the length
// limits; it reports whether any are left to store.
func (q *Queue) preparePublishes(ctx context.Context) bool {
	if len(q.publishes) == 0 {
		return false
	}
	now := q.cfg.Clock.Now().UnixNano()
	for i := range q.publishes {
		q.publishes[i].EnqueuedAt = now
	}
	if q.feat.limited {
		q.applyLimits(ctx)
	}
	return len(q.publishes) > 0
}

// stored makes an appended batch ready and confirms it (err nil), or
// nacks it and recounts the ready messages (err set). The caller clears
// recs and confirms afterwards.
func (q *Queue) stored(ctx context.Context, recs []storage.Record, confirms []confirm, err error) {
	if err == nil {
		if q.cfg.Shared {
			q.storedShared(recs)
		} else {
			q.fromCursor += uint64(len(recs))
			// Keep the new records in memory when everything before them is.
			if uint64(len(q.pending)) == q.fromCursor-uint64(len(recs)) &&
				len(q.pending)+len(recs) <= maxPending {
				q.appendPending(recs)
			}
		}
		if q.feat.bytes {
			for i := range recs {
				q.feat.readyBytes += int64(len(recs[i].Body))
			}
		}
		if q.feat.ttlArg {
			q.feat.ttl = true
		}
		for i := 0; !q.feat.ttl && i < len(recs); i++ {
			q.feat.ttl = recs[i].ExpiresAt != 0
		}
	} else {
		err = fmt.Errorf("queue: store %s: %w", q.cfg.Name, err)
		q.cfg.Logger.Error("append failed", "queue", q.cfg.Name, "err", err)
		// The records may be stored all the same (storage: a failed Append
		// may or may not have stored them); the publishers hear nack (or,
		// when the store says it cannot tell, nothing: see
		// storage.ErrOutcomeUnknown), and the ready count is taken from
		// the shard again, after they heard: recounting reads the store,
		// which may wait as long as the failure lasts.
	}
	// One Confirm call per run of publishes from the same confirmer.
	for i := 0; i < len(confirms); {
		c := confirms[i]
		j := i + 1
		for j < len(confirms) && confirms[j].conf == c.conf {
			j++
		}
		if c.conf != nil {
			q.seqs = q.seqs[:0]
			for _, x := range confirms[i:j] {
				q.seqs = append(q.seqs, x.seq)
			}
			c.conf.Confirm(q.seqs, err)
		}
		i = j
	}
	if err != nil {
		q.countReady(ctx)
	}
	if err == nil && q.feat.limited {
		q.dropOverflow(ctx)
	}
}

// assignment is one message picked for one consumer (or a get).
type assignment struct {
	consumer *Consumer
	rec      storage.Record
	count    uint32 // deliveries before this one
	returned bool   // from the returned set, else from the cursor
}

// fill makes sure pending holds at least n records if the shard has them.
func (q *Queue) fill(ctx context.Context, n int) error {
	if len(q.pending) >= n || uint64(len(q.pending)) >= q.fromCursor {
		return nil
	}
	from := q.cursor
	if len(q.pending) > 0 {
		from = q.pending[len(q.pending)-1].Offset + 1
	}
	want := max(n-len(q.pending), maxBatch)
	recs, err := q.cfg.Stores.Shards.Read(ctx, q.cfg.Shard, from, want)
	if err != nil {
		return err
	}
	if len(recs) == 0 && !q.cfg.Shared {
		// The counts said there were more records than the shard has:
		// trust the shard. (In shared mode the tail only grows: a claim
		// or a ChangeCursor settles the count.)
		q.fromCursor = uint64(len(q.pending))
	}
	q.appendPending(recs)
	return nil
}

// take picks the next ready message: the lowest returned offset first, then
// the next record at the cursor.
func (q *Queue) take(ctx context.Context, pos int) (assignment, bool, error) {
	if q.cfg.Shared && len(q.returned) > 0 {
		if err := q.loadHead(ctx); err != nil {
			return assignment{}, false, err
		}
	}
	if len(q.returned) > 0 {
		off := q.returned[0]
		q.returned = q.returned[1:]
		w := q.waiting[off]
		delete(q.waiting, off)
		return assignment{rec: w.rec, count: w.count, returned: true}, true, nil
	}
	if err := q.fill(ctx, pos+1); err != nil {
		return assignment{}, false, err
	}
	if pos >= len(q.pending) {
		return assignment{}, false, nil
	}
	return assignment{rec: q.pending[pos]}, true, nil
}

// putBack undoes take for the assignments of a claim that failed.
func (q *Queue) putBack(batch []assignment) {
	for i := range batch {
		q.becameReady(&batch[i].rec)
	}
	for _, a := range batch {
		if a.returned {
			q.waiting[a.rec.Offset] = waiting{rec: a.rec, count: a.count}
			q.insertReturned(a.rec.Offset)
		}
		if a.consumer != nil {
			a.consumer.release()
		}
	}
}

func (q *Queue) dispatch(ctx context.Context) {
	q.promote(ctx)
	batch := q.scratch.batch[:0]
	defer func() { q.scratch.batch = batch[:0] }()
	lost := 0 // claims lost to other brokers (shared mode)
	for q.ready() > 0 && q.consumers.len() > 0 && q.requeuing.Load() == 0 {
		if q.feat.ttl {
			q.expireHead(ctx)
			if q.ready() == 0 {
				break
			}
		}
		clear(batch) // assignments hold bodies: let the last batch's go
		batch = batch[:0]
		avail := min(q.ready(), maxBatch)
		fromCursor := 0 // records taken from the head of pending
		for uint64(len(batch)) < avail {
			if q.feat.ttl && q.headExpired(ctx, fromCursor) {
				break // expireHead takes it once this batch is claimed
			}
			c := q.acquireConsumer()
			if c == nil {
				break // nobody has credit
			}
			if q.requeuing.Load() > 0 {
				// The credit may be one a requeue freed: handle the
				// requeue first (see requeuing).
				c.release()
				break
			}
			a, ok, err := q.take(ctx, fromCursor)
			if err != nil || !ok {
				c.release()
				if err != nil {
					q.failed(err, batch)
					clear(batch)
					return
				}
				break
			}
			if !a.returned {
				fromCursor++
			}
			q.tookReady(&a.rec)
			a.consumer = c
			batch = append(batch, a)
		}
		if len(batch) == 0 {
			return
		}
		if err := q.claim(ctx, batch, fromCursor); err != nil {
			if errors.Is(err, errLostClaim) {
				// Another broker got there first: give the batch (and
				// its credit) back, catch up with the store, try again,
				// or, after many losses in a row, at the retry.
				q.putBack(batch)
				q.resync(ctx, hasReturned(batch))
				if lost++; lost < maxLostClaims {
					continue
				}
				q.scheduleRetry()
				clear(batch)
				return
			}
			q.failed(err, batch)
			clear(batch)
			return
		}
		for _, a := range batch {
			q.deliver(ctx, a)
		}
	}
	clear(batch)
}

// failed logs a store error, undoes the batch and schedules a retry.
func (q *Queue) failed(err error, batch []assignment) {
	q.cfg.Logger.Error("delivery failed", "queue", q.cfg.Name, "err", err)
	q.putBack(batch)
	q.scheduleRetry()
}

// scheduleRetry arms the retry timer unless it is armed: the actor then
// redoes what store errors left undone and tries to deliver again.
func (q *Queue) scheduleRetry() {
	if q.retryC != nil {
		return
	}
	if q.retry == nil {
		q.retry = time.NewTimer(retryAfter)
	} else {
		q.retry.Reset(retryAfter)
	}
	q.retryC = q.retry.C
}

// settles reports whether ops of kind settle deliveries.
func (q *Queue) settles(kind opKind) bool {
	return kind == opAck || kind == opReject || kind == opRequeue || kind == opRequeueEntries
}

// redo retries the work store errors left undone. Each step that fails
// again puts its work back and re-arms the timer.
func (q *Queue) redo(ctx context.Context) {
	if refs := q.retrySettle; len(refs) > 0 {
		q.retrySettle = nil
		q.settle(ctx, refs)
	}
	if keys := q.retryKeys; len(keys) > 0 {
		q.retryKeys = nil
		if err := q.cfg.Stores.Index.Delete(ctx, keys); err != nil {
			q.cfg.Logger.Error("index delete failed again", "queue", q.cfg.Name, "err", err)
			q.retryKeys = keys
			q.scheduleRetry()
		}
	}
	if refs := q.retryRequeue; len(refs) > 0 {
		q.retryRequeue = nil
		q.requeue(ctx, refs)
	}
	if q.recount {
		q.countReady(ctx)
	}
}

// countReady takes the count of records at and after the cursor from the
// shard, after an Append whose outcome is unknown.
func (q *Queue) countReady(ctx context.Context) {
	var n uint64
	err := q.eachRecord(ctx, q.cursor, ^uint64(0), func(batch []storage.Record) error {
		n += uint64(len(batch))
		return nil
	})
	if err != nil {
		q.recount = true
		q.scheduleRetry()
		return
	}
	q.recount = false
	if q.cfg.Shared {
		// Records at and beyond the cursor are dense (shared.go).
		q.shared.tail = max(q.shared.tail, q.cursor+n)
		q.syncReady()
	} else {
		q.fromCursor = n
	}
	q.emptyPending()
}

// claim commits a batch of assignments to the stores in the order the
// design requires: index entries first, then the cursor CAS, then the
// deletes of no-ack deliveries. fromCursor records at the head of pending
// are consumed by the batch.
func (q *Queue) claim(ctx context.Context, batch []assignment, fromCursor int) error {
	s := q.cfg.Stores
	now := q.cfg.Clock.Now().UnixNano()
	entries, drop, dropKeys := q.scratch.entries[:0], q.scratch.offsets[:0], q.scratch.keys[:0]
	taken := q.shared.taken[:0]
	defer func() {
		clear(entries) // entries hold strings: let them go
		clear(taken)
		q.scratch.entries, q.scratch.offsets, q.scratch.keys = entries[:0], drop[:0], dropKeys[:0]
		q.shared.taken = taken[:0]
	}()
	for i := range batch {
		a := &batch[i]
		owner := a.consumer.Owner
		if q.cfg.Shared && a.returned {
			// A returned message is the shared pool's: the claim takes it
			// (Taken) and writes its entry, no-ack ones too; those are
			// deleted below as today.
			taken = append(taken, q.indexKey(a.rec.Offset))
			if a.consumer.NoAck {
				entries = append(entries, q.entry(a.rec.Offset, owner, now, a.count+1))
			}
		}
		if a.consumer.NoAck {
			drop = append(drop, a.rec.Offset)
			if a.returned {
				dropKeys = append(dropKeys, q.indexKey(a.rec.Offset))
			}
			continue
		}
		entries = append(entries, q.entry(a.rec.Offset, owner, now, a.count+1))
	}
	var newCursor uint64
	if fromCursor > 0 {
		newCursor = q.pending[fromCursor-1].Offset + 1
	}
	if err := q.commit(ctx, entries, taken, newCursor, fromCursor > 0); err != nil {
		return err
	}
	if fromCursor == len(q.pending) {
		q.emptyPending()
	} else {
		q.pending = q.pending[fromCursor:]
	}
	if q.cfg.Shared {
		q.syncReady()
	} else {
		q.fromCursor -= uint64(fromCursor)
	}
	if len(drop) > 0 {
		if err := s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, drop); err != nil {
			// The messages are delivered (at most once, as no-ack
			// promises); a record left behind is deleted at recovery.
			q.cfg.Logger.Error("delete failed", "queue", q.cfg.Name, "err", err)
		}
	}
	if len(dropKeys) > 0 {
		if err := s.Index.Delete(ctx, dropKeys); err != nil {
			q.cfg.Logger.Error("index delete failed", "queue", q.cfg.Name, "err", err)
		}
	}
	return nil
}

// commit writes index entries, then moves the cursor to newCursor when move
// is set. If the CAS loses (another node moved the cursor) the entries are
// taken back and the cached records dropped, so the next claim re-reads.
// In shared mode it is one Claimer claim that also takes the returned
// messages named by taken (commitShared); taken is nil otherwise.
func (q *Queue) commit(ctx context.Context, entries []unacked.Entry, taken []unacked.Key, newCursor uint64, move bool) error {
	if q.cfg.Shared {
		return q.commitShared(ctx, entries, taken, newCursor, move)
	}
	s := q.cfg.Stores
	if len(entries) > 0 {
		if err := s.Index.Put(ctx, entries); err != nil {
			return err
		}
	}
	if !move {
		return nil
	}
	swapped, err := s.Cursors.CompareAndSwapOffset(ctx, q.key, q.cursor, newCursor)
	if err == nil && !swapped {
		err = errors.New("queue: cursor moved by someone else")
		if cur, rerr := s.Cursors.Offset(ctx, q.key); rerr == nil {
			q.cursor = cur
			q.emptyPending()
		}
	}
	if err != nil {
		var keys []unacked.Key
		for _, e := range entries {
			if e.Offset >= q.cursor {
				keys = append(keys, e.Key)
			}
		}
		if len(keys) > 0 {
			_ = s.Index.Delete(ctx, keys) // best effort: recovery drops them too
		}
		return err
	}
	q.cursor = newCursor
	return nil
}

// cursorDeleter is the part of meta.Topology that deletes a queue's cursor.
type cursorDeleter interface {
	DeleteQueue(ctx context.Context, vhost, name string) error
}

func (q *Queue) indexKey(offset uint64) unacked.Key {
	return unacked.Key{VHost: q.cfg.VHost, Queue: q.cfg.Name, Offset: offset}
}

func (q *Queue) entry(offset uint64, owner Owner, now int64, count uint32) unacked.Entry {
	return unacked.Entry{
		Key:           q.indexKey(offset),
		Connection:    owner.Connection,
		Channel:       owner.Channel,
		Broker:        q.cfg.Broker,
		Incarnation:   q.cfg.Incarnation,
		DeliveredAt:   now,
		DeliveryCount: count,
		State:         unacked.Delivered,
	}
}

func (q *Queue) deliver(ctx context.Context, a assignment) {
	c := a.consumer
	q.claims++
	m := Message{
		Record:        a.rec,
		Redelivered:   a.count > 0,
		DeliveryCount: a.count + 1,
		Ref:           Ref{Offset: a.rec.Offset, Claim: q.claims},
	}
	if a.count > 0 && q.cfg.Features.Args.Quorum {
		m.Properties = withDeliveryCount(a.rec.Properties, a.count)
	}
	if !c.NoAck {
		d := q.newDelivery()
		*d = delivery{rec: a.rec, claim: q.claims, owner: c.Owner, count: a.count + 1, consumer: c}
		q.out[a.rec.Offset] = d
	}
	if c.Receiver.Deliver(c, m) {
		q.countDelivery(false, c.NoAck, m.Redelivered)
		return
	}
	// The channel is closing: take the message back and drop the consumer.
	c.release()
	q.removeConsumer(c.Owner, c.Tag)
	if !c.NoAck {
		q.requeue(ctx, []Ref{m.Ref})
	}
}

func (q *Queue) get(ctx context.Context, owner Owner, noAck bool) (Message, bool, error) {
	var a assignment
	for lost := 0; ; lost++ {
		if q.feat.ttl {
			q.expireHead(ctx)
		}
		q.promote(ctx)
		if q.ready() == 0 {
			return Message{}, false, nil
		}
		var ok bool
		var err error
		a, ok, err = q.take(ctx, 0)
		if err != nil || !ok {
			return Message{}, false, err
		}
		q.tookReady(&a.rec)
		a.consumer = &Consumer{Owner: owner, NoAck: noAck}
		n := 0
		if !a.returned {
			n = 1
		}
		err = q.claim(ctx, []assignment{a}, n)
		if err == nil {
			break
		}
		q.putBack([]assignment{a})
		if !errors.Is(err, errLostClaim) {
			return Message{}, false, err
		}
		// Another broker claimed it first: catch up and take the next.
		q.resync(ctx, a.returned)
		if lost >= maxLostClaims {
			return Message{}, false, nil // get-empty: the others took them
		}
	}
	q.claims++
	m := Message{
		Record:        a.rec,
		Redelivered:   a.count > 0,
		DeliveryCount: a.count + 1,
		Ref:           Ref{Offset: a.rec.Offset, Claim: q.claims},
	}
	if a.count > 0 && q.cfg.Features.Args.Quorum {
		m.Properties = withDeliveryCount(a.rec.Properties, a.count)
	}
	if !noAck {
		d := q.newDelivery()
		*d = delivery{rec: a.rec, claim: q.claims, owner: owner, count: a.count + 1}
		q.out[a.rec.Offset] = d
	}
	q.countDelivery(true, noAck, m.Redelivered)
	return m, true, nil
}

// live returns the deliveries refs still name, removing them from out.
// The slice is the actor's scratch, valid until the next call.
func (q *Queue) live(refs []Ref) []*delivery {
	ds := q.scratch.live[:0]
	defer func() { q.scratch.live = ds[:0] }()
	for _, r := range refs {
		d, ok := q.out[r.Offset]
		if !ok || d.claim != r.Claim {
			continue // settled or requeued already: the first settle won
		}
		delete(q.out, r.Offset)
		ds = append(ds, d)
	}
	return ds
}

// settle deletes delivered messages: the record first, then the index entry,
// so a crash in between leaves an entry without a record (dropped at
// recovery), never a record nobody will deliver.
func (q *Queue) settle(ctx context.Context, refs []Ref) {
	ds := q.live(refs)
	if len(ds) == 0 {
		return
	}
	offsets, keys := q.scratch.offsets[:0], q.scratch.keys[:0]
	for _, d := range ds {
		offsets = append(offsets, d.rec.Offset)
		keys = append(keys, q.indexKey(d.rec.Offset))
	}
	defer func() { q.scratch.offsets, q.scratch.keys = offsets[:0], keys[:0] }()
	if err := q.cfg.Stores.Shards.DeleteByOffsets(ctx, q.cfg.Shard, offsets); err != nil {
		// The client has settled these: they stay out, owned by the
		// queue, until the delete succeeds.
		q.cfg.Logger.Error("ack failed", "queue", q.cfg.Name, "err", err)
		q.restore(ds)
		for _, d := range ds {
			q.retrySettle = append(q.retrySettle, Ref{Offset: d.rec.Offset, Claim: d.claim})
		}
		q.scheduleRetry()
		return
	}
	q.recycle(ds)
	if err := q.cfg.Stores.Index.Delete(ctx, keys); err != nil {
		// A Delivered entry must not outlive its message: the scanner
		// would time it out and close a channel that did nothing wrong.
		q.cfg.Logger.Error("ack index delete failed", "queue", q.cfg.Name, "err", err)
		q.retryKeys = append(q.retryKeys, keys...) // a copy: keys is scratch
		q.scheduleRetry()
	}
}

// maxFreeDeliveries bounds the recycled deliveries kept for reuse.
const maxFreeDeliveries = 4096

// newDelivery returns a zeroed delivery for out.
func (q *Queue) newDelivery() *delivery {
	if n := len(q.freeDeliveries); n > 0 {
		d := q.freeDeliveries[n-1]
		q.freeDeliveries = q.freeDeliveries[:n-1]
		return d
	}
	if len(q.deliverySlab) == 0 {
		q.deliverySlab = make([]delivery, 64)
	}
	d := &q.deliverySlab[0]
	q.deliverySlab = q.deliverySlab[1:]
	return d
}

// recycle recycles deliveries taken out of out for good.
func (q *Queue) recycle(ds []*delivery) {
	for _, d := range ds {
		*d = delivery{} // drop the message
		if len(q.freeDeliveries) < maxFreeDeliveries {
			q.freeDeliveries = append(q.freeDeliveries, d)
		}
	}
}

// restore puts deliveries back after a failed settle, so the message is
// neither lost nor settled twice.
func (q *Queue) restore(ds []*delivery) {
	for _, d := range ds {
		q.out[d.rec.Offset] = d
	}
}

// requeue is the one requeue primitive: each live delivery's index entry
// flips to Returned in one write and its offset joins the returned set, so
// the message goes back to its original position.
func (q *Queue) requeue(ctx context.Context, refs []Ref) {
	ds := q.live(refs)
	if q.cfg.Features.Args.DeliveryLimit >= 0 {
		ds = q.overDeliveryLimit(ctx, ds)
	}
	if len(ds) == 0 {
		return
	}
	now := q.cfg.Clock.Now().UnixNano()
	entries := q.scratch.entries[:0]
	for _, d := range ds {
		e := q.entry(d.rec.Offset, d.owner, now, d.count)
		e.State = unacked.Returned
		entries = append(entries, e)
	}
	defer func() { clear(entries); q.scratch.entries = entries[:0] }()
	if err := q.cfg.Stores.Index.Put(ctx, entries); err != nil {
		// Nobody holds these any more: they stay out, owned by the queue,
		// until the index write succeeds.
		q.cfg.Logger.Error("requeue failed", "queue", q.cfg.Name, "err", err)
		q.restore(ds)
		for _, d := range ds {
			q.retryRequeue = append(q.retryRequeue, Ref{Offset: d.rec.Offset, Claim: d.claim})
		}
		q.scheduleRetry()
		return
	}
	for _, d := range ds {
		q.waiting[d.rec.Offset] = waiting{rec: d.rec, count: d.count}
		q.insertReturned(d.rec.Offset)
		q.becameReady(&d.rec)
	}
	q.recycle(ds)
}

func insertSorted(s []uint64, v uint64) []uint64 {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, i, v)
}

// purge deletes the ready messages: the returned set and everything from
// the cursor on. Records go first, then the cursor moves past them.
func (q *Queue) purge(ctx context.Context) (uint64, error) {
	s := q.cfg.Stores
	var n uint64
	if len(q.returned) > 0 {
		keys := make([]unacked.Key, len(q.returned))
		for i, off := range q.returned {
			keys[i] = q.indexKey(off)
		}
		if err := s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, q.returned); err != nil {
			return 0, err
		}
		if err := s.Index.Delete(ctx, keys); err != nil {
			return 0, err
		}
		n += uint64(len(q.returned))
		q.returned = nil
		clear(q.waiting)
	}
	last, deleted := q.cursor, uint64(0)
	err := q.eachRecord(ctx, q.cursor, ^uint64(0), func(batch []storage.Record) error {
		offsets := make([]uint64, len(batch))
		for i, r := range batch {
			offsets[i] = r.Offset
		}
		if err := s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, offsets); err != nil {
			return err
		}
		deleted += uint64(len(batch))
		last = batch[len(batch)-1].Offset + 1
		return nil
	})
	q.emptyPending()
	if err != nil {
		q.fromCursor -= min(q.fromCursor, deleted)
		return n + deleted, err
	}
	if last != q.cursor {
		if err := q.commit(ctx, nil, nil, last, true); err != nil {
			return n + deleted, err
		}
	}
	q.fromCursor = 0
	q.feat.readyBytes = 0
	return n + deleted, nil
}

func (q *Queue) deleteAll(ctx context.Context) (uint64, error) {
	s := q.cfg.Stores
	ready := q.ready()
	q.consumers.each(func(c *Consumer) { c.Receiver.Cancelled(c) })
	q.consumers.reset()
	// The cursor goes back to 0 first: a queue declared again under this
	// name starts its shard at offset 0, and a crash half-way through must
	// leave old records to deliver again, never a cursor past new ones.
	if q.cfg.Shared {
		// Other brokers may have moved the cursor since this one looked.
		cur, err := s.Cursors.Offset(ctx, q.key)
		if err != nil {
			return 0, err
		}
		q.cursor = cur
	}
	if q.cursor != 0 {
		if _, err := s.Cursors.CompareAndSwapOffset(ctx, q.key, q.cursor, 0); err != nil {
			return 0, err
		}
	}
	if err := s.Index.DeleteQueue(ctx, q.cfg.VHost, q.cfg.Name); err != nil {
		return 0, err
	}
	if err := s.Shards.DeleteShard(ctx, q.cfg.Shard); err != nil {
		return 0, err
	}
	if q.cfg.OwnCursor {
		if d, ok := s.Cursors.(cursorDeleter); ok {
			if err := d.DeleteQueue(ctx, q.cfg.VHost, q.cfg.Name); err != nil {
				return 0, err
			}
		}
	}
	q.deleted = true
	q.pending, q.pendingArr, q.returned, q.out = nil, nil, nil, nil
	q.dropLeaving()
	clear(q.waiting)
	return ready, nil
}
