package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// Ref names the delivery to Settle (or AckGot).
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
	// Stream is where a consumer of a stream starts and what it filters
	// (ParseStreamConsume); nil starts at the next message.
	Stream *StreamConsume

	room  Roomer        // Receiver's Roomer, if it is one; set when registered
	links consumerLinks // its place among the queue's consumers (consumers.go)

	flushQueued bool // in the queue's list of receivers to flush (flush.go)
}

// Roomer is implemented by Receivers whose connection has a bounded write
// buffer. HasRoom runs on the queue's goroutine before a delivery: false
// skips the consumer as if it had no credit, and the receiver must Kick the
// queue once there is room again. So a client that stops reading holds a
// bounded amount of broker memory, and the queue never waits for it.
type Roomer interface {
	HasRoom(c *Consumer) bool
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

// delivery is a message that is out: delivered and not yet settled.
type delivery struct {
	rec   storage.Record
	claim uint64
	owner Owner
	count uint32
	// failed counts the failed deliveries (quorum.go, counting failed
	// deliveries only),
	// also in its index entry (unacked.Entry.Failed), so that it
	// survives a restart as RabbitMQ 4.3's raft log keeps it.
	failed   uint32
	consumer *Consumer // nil for basic.get
	// once: its index entry was put once, when it was claimed from the
	// cursor, and never rewritten, so settling it may delete the entry
	// as written once (settle.go, entryDeleter).
	once bool
}

// waiting is a message requeued in place, served before the cursor.
type waiting struct {
	rec    storage.Record
	count  uint32
	failed uint32 // see delivery.failed
	// lazy: rec is not loaded yet (shared mode: a message another broker
	// requeued); it is read from the shard when needed (loadHead).
	lazy bool
}

// Queue is one queue's actor. Its exported methods are safe for concurrent
// use. Its state has one owner at a time, whoever holds its state token
// (own, owner.go): the actor goroutine, or a Get or AckGot caller the
// sleeping actor handed it to.
//
// The fields are grouped by job; each group names the file that works on
// it.
type Queue struct {
	cfg Config
	key meta.QueueKey
	// claimer is the claiming strategy, local or shared, chosen at Start
	// (claimer.go); inPlace says whether Get and the ack of a got message
	// may run on the caller's goroutine (actor.go, "Ownership"): shared
	// queues keep the mailbox, their answers wait on observed changes.
	claimer claimer
	// kind is the queue's kind (kind.go): classic, quorum, or the
	// stream. Chosen once at Start, like claimer. msgKind is the message
	// kind the message code asks (the kind itself for classic and
	// quorum), byPriority its answer to byPriority.
	kind       kind
	msgKind    messageKind
	byPriority bool

	// The actor loop and its mailboxes (actor.go, mailbox.go, stop.go).
	mbox mailbox // calls to the actor (mailbox.go)
	kick chan struct{}
	done chan struct{}
	// running says that an actor goroutine exists (actor.go, "Lifecycle"):
	// Kick starts one when it is false, and the goroutine clears it when
	// it exits for want of work. It stays true once the actor stopped for
	// good, so nothing starts another.
	running atomic.Bool
	// actors counts the goroutines acting as the actor: run panics when
	// it would be two (a check, as mustHold is for the token).
	actors atomic.Int32
	// halting is set by StopAll (stop.go): the actor's next step stops it.
	halting   atomic.Pointer[halt]
	stopOnce  sync.Once
	idleAfter time.Duration // idleAfter when the queue started
	// group counts the dead-lettering in flight among the queues of this
	// one's vhost (Group); leavingN counts this queue's leaving messages.
	group    *Group
	leavingN Group
	stepOps  int         // inbox ops taken in this step, given back by endStep
	closing  atomic.Bool // set by the actor when it stops taking ops
	// inPlace is claimer's (above), here in closing's padding (inboxLen).
	inPlace bool
	queued  atomic.Int64 // ops sent to the mailbox and not yet handled
	// requeuing counts requeue ops sent but not yet handled. A channel
	// requeues before it frees the prefetch credit the delivery held, so a
	// dispatch that finds credit and a requeue on its way stops and lets the
	// run loop handle the requeue first: the freed credit then serves the
	// requeued message at the head, not the next one from the cursor.
	requeuing atomic.Int32
	// inboxLen is the inbox's length (inbox.go). It sits next to
	// requeuing, and inPlace in closing's padding, so that a Queue with
	// its 8-byte allocation header stays in the 1408-byte size class.
	inboxLen atomic.Int32
	// inbox is the non-blocking mailbox (inbox.go): dead-lettered
	// copies from other actors, their confirms and timer firings.
	inbox struct {
		sync.Mutex
		ops     []op
		closed  bool
		deleted bool // closed because the queue was deleted
	}

	// own is the state token: whoever holds it owns everything below
	// (owner.go).
	own stateToken

	// Owned by the state's holder from here on: the actor goroutine, or a
	// Get or AckGot caller it handed the token to while it slept.

	deleted bool // Delete ran: the actor refuses what follows and stops

	// Ready messages and the claim cursor (deliver.go, recover.go).
	cursor     uint64           // next offset to claim from the shard
	fromCursor uint64           // live records at offsets >= cursor
	pending    []storage.Record // a prefix of those records, read or appended
	// pendingArr is the array pending was last moved into (appendPending),
	// full length; kept while small once pending empties (emptyPending).
	pendingArr []storage.Record
	returned   []uint64 // requeued offsets, ascending
	waiting    map[uint64]waiting
	consumers  consumerSet

	// Deliveries out and their settling (settle.go).
	out    map[uint64]*delivery // from newDelivery: no allocation per delivery
	claims uint64
	acks   []Ref // acks gathered from the mailbox, settled together
	// Deliveries are carved from slabs and recycled through a free list:
	// one allocation per 64 deliveries instead of one each.
	deliverySlab   []delivery
	freeDeliveries []*delivery

	// Publishes gathered and committed (publish.go).
	publishes []storage.Record
	confirms  []confirm
	// A batch holding persistent records is appended by a committer
	// goroutine (startCommit), so the actor keeps delivering and settling
	// while the store syncs. At most one is in flight: batches are stored
	// and confirmed in publish order. commitDone carries its outcome back.
	committing bool
	commitDone chan commitResult

	// Work a store error left undone, redone when the retry timer fires
	// (actor.go: redo): settles whose record delete failed (the
	// deliveries stay in out), index entries of settled messages whose
	// delete failed, requeues whose index write failed (the deliveries
	// stay in out), and a ready count to take again after an Append failed
	// (its records may or may not be stored). undone is made by the first
	// store error (later) and let go once redone.
	retry   *time.Timer
	retryC  <-chan time.Time
	undone  *undone
	recount bool

	// scratch holds the actor's reusable slices, so a claim, a settle or a
	// requeue allocates nothing per message in the steady state. None of
	// them is kept past the call that fills it: the stores copy what they
	// keep. It is allocated for a step (prepare) and let go when the queue
	// goes idle (trim), so an idle queue pays a pointer for it.
	scratch *scratch

	feat     featureState // owned by the actor (features.go)
	stream   *streamState // a stream's log view and readers (stream.go); nil otherwise
	counters Counters     // message counters, read from any goroutine (inspect.go)
	// counts are the Stats the last step left (publishCounts), read by
	// Counts and Sampled from any goroutine; memory is Usage's estimate as
	// the actor last went idle (trim).
	counts struct {
		ready, unacked atomic.Uint64
		consumers      atomic.Int64
		memory         atomic.Uint64
	}
	notices notices // demand watchers, poked by publishCounts (queue_notice.go)
}

const (
	// maxPending and maxPendingBytes bound the records kept in memory
	// ahead of the cursor (pendingFits). Beyond them a queue's deliveries
	// read their records back from the shard, which costs a consumer
	// that has fallen behind more per message than one that keeps up, so
	// small messages get room for a backlog of several thousand.
	maxPending      = 16384
	maxPendingBytes = 4 << 20
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
		cfg:       cfg,
		key:       meta.QueueKey{VHost: cfg.VHost, Name: cfg.Name},
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		group:     cfg.Features.Group,
		idleAfter: idleAfter,
	}
	if q.group == nil {
		q.group = NewGroup()
	}
	// The claiming strategy is chosen here, once (claimer.go).
	if cfg.Features.Args.Stream {
		// A stream claims nothing: its consumers read the log (stream.go).
		q.stream = &streamState{q: q}
		q.claimer = &streamClaimer{s: q.stream}
		q.kind = q.stream
	} else if cfg.Shared {
		c, ok := cfg.Stores.Index.(unacked.Claimer)
		if !ok {
			return nil, fmt.Errorf("queue: %s: shared mode needs an unacked.Claimer index, %T is not one", cfg.Name, cfg.Stores.Index)
		}
		q.claimer = &sharedClaimer{q: q, store: c}
	} else {
		q.claimer = &localClaimer{q: q}
		q.inPlace = true
	}
	// So is the kind (kind.go).
	q.msgKind = newMessageKind(q)
	q.byPriority = q.msgKind.byPriority()
	if q.kind == nil {
		q.kind = q.msgKind
	}
	// Start owns the state until the actor runs (owner.go).
	q.own.acquire()
	q.prepare()
	if err := q.claimer.recover(ctx); err != nil {
		return nil, fmt.Errorf("queue: recover %s: %w", cfg.Name, err)
	}
	q.initFeatures()
	q.publishCounts()
	retrying := q.retryC != nil
	q.trim()
	q.own.release()
	// The actor goroutine starts with the first op or Kick (actor.go,
	// "Lifecycle"); a retry recovery scheduled needs it now.
	if retrying {
		q.Kick()
	}
	return q, nil
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.cfg.Name }

// VHost returns the queue's vhost.
func (q *Queue) VHost() string { return q.cfg.VHost }

// Stats returns the queue's counts, after every earlier call on it.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	r, err := q.call(ctx, op{kind: opStats})
	return r.stats, err
}

// Kick wakes the actor to retry delivery, for example after a channel
// settled messages and so freed prefetch credit. It never blocks.
func (q *Queue) Kick() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
	q.wake()
}

// Done is closed when the actor has stopped.
func (q *Queue) Done() <-chan struct{} { return q.done }

// Counts returns the queue's counts as its last step left them, without
// asking the actor: it neither waits on it nor wakes it. Stats is the
// exact answer, after every earlier call; Counts is for what reads every
// queue periodically (the rate sampler, the overview), so that 100,000
// idle queues are read without starting 100,000 actors. A change another
// broker made (shared mode) shows once the actor has applied it.
func (q *Queue) Counts() Stats {
	return Stats{
		Ready:     q.counts.ready.Load(),
		Unacked:   q.counts.unacked.Load(),
		Consumers: int(q.counts.consumers.Load()),
	}
}

// Sampled is Counts with the memory estimate Usage gives, as the actor
// left it when it last went idle (trim), without waking the actor.
// running reports that an actor goroutine exists now: the queue has work,
// its memory may have moved since, and asking it (Usage) starts no
// goroutine. When running is false the memory is exact unless a Get or
// AckGot is running in place at this moment. The management API's queue
// listings and the Prometheus metrics read it, so that listing 100,000
// idle queues wakes none.
func (q *Queue) Sampled() (u Usage, running bool) {
	running = q.running.Load()
	u.Stats = q.Counts()
	u.Memory = q.counts.memory.Load()
	return u, running
}

// publishCounts stores the counts Counts reads, at the end of every step.
func (q *Queue) publishCounts() {
	st := q.stats()
	changed := q.demandChanged(st) // compared with what the stores replace
	q.counts.ready.Store(st.Ready)
	q.counts.unacked.Store(st.Unacked)
	q.counts.consumers.Store(int64(st.Consumers))
	if changed {
		q.poke() // after the stores: a poked watcher reads the new counts
	}
}

func (q *Queue) stats() Stats { return q.kind.stats() }

// messageStats is stats for a classic or quorum queue (messages).
func (q *Queue) messageStats() Stats {
	return Stats{
		Ready:     q.fromCursor + uint64(len(q.returned)),
		Unacked:   uint64(len(q.out)),
		Consumers: q.consumers.len(),
	}
}

func (q *Queue) ready() uint64 { return q.fromCursor + uint64(len(q.returned)) }

// scratch is the actor's reusable slices (Queue.scratch).
type scratch struct {
	batch   []assignment
	entries []unacked.Entry
	offsets []uint64
	keys    []unacked.Key
	live    []*delivery
	// claim's returned messages (claimWrite.taken, takenNoAck)
	taken      []unacked.Key
	takenNoAck []unacked.Entry
	flush      []*Consumer // receivers to flush after a batch (flush.go)
	// spare are the previous commit's slices, reused (publish.go).
	spare struct {
		recs     []storage.Record
		confirms []confirm
	}
	seqs []uint64 // for Confirm calls
}

// undone is the work store errors left for the retry timer
// (Queue.undone).
type undone struct {
	settle  []Ref
	keys    []unacked.Key
	requeue []Ref
}

// later returns the work left for the retry timer, made on first use.
func (q *Queue) later() *undone {
	if q.undone == nil {
		q.undone = new(undone)
	}
	return q.undone
}
