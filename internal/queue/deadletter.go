package queue

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/internal/queueargs"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// Dead-letter reasons, as RabbitMQ writes them into x-death.
const (
	ReasonRejected      = "rejected"
	ReasonExpired       = "expired"
	ReasonMaxLen        = "maxlen"
	ReasonDeliveryLimit = "delivery_limit"
)

// Death describes one dead-lettering of a message.
type Death struct {
	Queue       string
	Reason      string
	Exchange    string   // the exchange the message was published to
	RoutingKeys []string // the routing keys it was published with
	Time        time.Time
	// DropCC removes the CC header from the copy: its queue has an
	// x-dead-letter-routing-key, which replaces every key it was
	// published with.
	DropCC bool
	// IgnoreClientDeaths: the message's x-death and x-first-death-*
	// headers are its publisher's (storage.Record.ClientHeaders) and are
	// not interpreted, as in RabbitMQ 4.x: the copy's death history starts
	// with this death and replaces them.
	IgnoreClientDeaths bool
}

// DeadLetterProperties returns raw properties for a dead-lettered copy of a
// message, maintained the way RabbitMQ 3.13 does:
//   - x-death holds one table per (queue, reason), most recent first; a
//     client's x-death counts only without d.IgnoreClientDeaths (3.13;
//     RabbitMQ 4.x replaces it and the x-first-death-* headers instead); a
//     repeat increments count and moves the entry to the front;
//   - x-first-death-queue/-reason/-exchange are set once;
//   - x-last-death-queue/-reason/-exchange follow the latest death;
//   - a per-message expiration is removed (so the copy does not expire
//     again at once) and kept in the new entry's original-expiration;
//   - a new entry's routing-keys are d.RoutingKeys followed by the keys of
//     the message's CC header (its BCC header was removed at publish), and
//     with DropCC the CC header goes after that (rabbit_dead_letter's
//     make_msg: the x-dead-letter-routing-key replaces the CC keys).
func DeadLetterProperties(raw []byte, d Death) ([]byte, error) {
	p, err := amqp.DecodeProperties(raw)
	if err != nil {
		return nil, err
	}
	h := amqp.Table{}
	for k, v := range p.Headers {
		h[k] = v
	}
	deaths, _ := h["x-death"].([]any)
	if d.IgnoreClientDeaths {
		deaths = nil
		delete(h, "x-first-death-queue")
	}
	found := -1
	for i, e := range deaths {
		t, ok := e.(amqp.Table)
		if ok && t["queue"] == d.Queue && t["reason"] == d.Reason {
			found = i
			break
		}
	}
	var entry amqp.Table
	if found >= 0 {
		old := deaths[found].(amqp.Table)
		entry = make(amqp.Table, len(old))
		for k, v := range old {
			entry[k] = v
		}
		count, _ := IntArg(entry["count"])
		entry["count"] = count + 1
		deaths = append(deaths[:found:found], deaths[found+1:]...)
	} else {
		keys := make([]any, len(d.RoutingKeys), len(d.RoutingKeys)+1)
		for i, k := range d.RoutingKeys {
			keys[i] = k
		}
		if cc, ok := h["CC"].([]any); ok {
			for _, k := range cc {
				if s, ok := k.(string); ok {
					keys = append(keys, s)
				}
			}
		}
		entry = amqp.Table{
			"queue":        d.Queue,
			"reason":       d.Reason,
			"count":        int64(1),
			"time":         d.Time.Truncate(time.Second),
			"exchange":     d.Exchange,
			"routing-keys": keys,
		}
		if p.Expiration != "" {
			entry["original-expiration"] = p.Expiration
		}
	}
	h["x-death"] = append([]any{entry}, deaths...)
	if _, ok := h["x-first-death-queue"]; !ok {
		h["x-first-death-queue"] = d.Queue
		h["x-first-death-reason"] = d.Reason
		h["x-first-death-exchange"] = d.Exchange
	}
	h["x-last-death-queue"] = d.Queue
	h["x-last-death-reason"] = d.Reason
	h["x-last-death-exchange"] = d.Exchange
	if d.DropCC {
		delete(h, "CC")
	}
	p.Headers = h
	p.Expiration = ""
	return p.Append(nil), nil
}

// IsDeadLetterCycle reports whether dead-lettering a message whose raw
// properties are raw into queue target would close a fully automatic
// cycle, which RabbitMQ drops: the message already died in target, and no
// death since then (that one included) was a rejection. A rejection by a
// consumer breaks the cycle, which is what makes retry loops work.
func IsDeadLetterCycle(raw []byte, reason, target string) bool {
	if reason == ReasonRejected {
		return false
	}
	p, err := amqp.DecodeProperties(raw)
	if err != nil {
		return false
	}
	deaths, _ := p.Headers["x-death"].([]any)
	for _, e := range deaths {
		t, ok := e.(amqp.Table)
		if !ok {
			return false
		}
		if t["reason"] == ReasonRejected {
			return false
		}
		if t["queue"] == target {
			return true
		}
	}
	return false
}

// IntArg reads an AMQP integer of any width from a table value, the way
// RabbitMQ accepts integer arguments.
func IntArg(v any) (int64, bool) { return queueargs.IntArg(v) }

// DeadLetterCounts count messages that died, by reason and by whether the
// queue had a dead-letter exchange: RabbitMQ 3.10's
// rabbitmq_global_messages_dead_lettered_<reason>_total with
// dead_letter_strategy "at_most_once" (a DLX is set, so a copy was routed
// if the DLX routed it anywhere) or "disabled" (no DLX: the message was
// dropped). A message refused by reject-publish-dlx counts as maxlen, as
// in RabbitMQ. Each field is an atomic: any goroutine may read them.
type DeadLetterCounts struct {
	counts [len(deadLetterReasons)][2]atomic.Uint64 // [reason][dlx]
}

// deadLetterReasons orders the reasons for DeadLetterCounts.
var deadLetterReasons = [...]string{ReasonExpired, ReasonRejected, ReasonMaxLen, ReasonDeliveryLimit}

// DeadLetterCount is one DeadLetterCounts value.
type DeadLetterCount struct {
	Reason string // ReasonExpired, ReasonRejected, ReasonMaxLen or ReasonDeliveryLimit
	DLX    bool   // the queue had a dead-letter exchange (at_most_once)
	N      uint64
}

// Load returns every count, reasons in the order expired, rejected,
// maxlen, delivery_limit, each with DLX first.
func (c *DeadLetterCounts) Load() []DeadLetterCount {
	out := make([]DeadLetterCount, 0, 2*len(deadLetterReasons))
	for i, r := range deadLetterReasons {
		out = append(out,
			DeadLetterCount{Reason: r, DLX: true, N: c.counts[i][1].Load()},
			DeadLetterCount{Reason: r, DLX: false, N: c.counts[i][0].Load()})
	}
	return out
}

// withDLX sums the counts of messages that had a dead-letter exchange.
func (c *DeadLetterCounts) withDLX() uint64 {
	var n uint64
	for i := range c.counts {
		n += c.counts[i][1].Load()
	}
	return n
}

func (c *DeadLetterCounts) add(reason string, dlx bool, n uint64) {
	for i, r := range deadLetterReasons {
		if r == reason {
			d := 0
			if dlx {
				d = 1
			}
			c.counts[i][d].Add(n)
			return
		}
	}
}

// countDeadLettered is the counting hook of dead-lettering: n messages of
// this queue died for reason, counted in the queue's counters and the
// broker's totals (Config.Totals).
func (q *Queue) countDeadLettered(reason string, n int) {
	if n <= 0 {
		return
	}
	dlx := q.cfg.Features.Args.HasDLX
	q.addCount(func(c *Counters) { c.DeadLettered.add(reason, dlx, uint64(n)) })
}

// emitDied reports messages of this queue that died for reason to
// Config.Events, one event each: MessageExpired for reason expired,
// MessageDeadLettered for the others, with the dead-letter exchange their
// copy went to, or Discarded when the queue has none (they were dropped). It
// is called where countDeadLettered counts, so events and counters agree;
// with no subscriber it costs one atomic load.
func (q *Queue) emitDied(reason string, recs []storage.Record) {
	kind := events.MessageDeadLettered
	if reason == ReasonExpired {
		kind = events.MessageExpired
	}
	h := q.cfg.Events
	if !h.On(kind) {
		return
	}
	a := q.cfg.Features.Args
	dlx, discarded := a.DeadLetterExch, !a.HasDLX || q.cfg.Features.DeadLetter == nil
	if discarded {
		dlx = ""
	}
	for i := range recs {
		r := &recs[i]
		h.Emit(events.Event{
			Kind: kind, VHost: q.cfg.VHost, Queue: q.cfg.Name,
			Exchange: r.Exchange, RoutingKey: r.RoutingKey,
			MessageID: events.MessageID(r.Properties),
			Reason:    reason, DeadLetterExchange: dlx, Discarded: discarded,
		})
	}
}

// emitRejected is emitDied for deliveries rejected without a dead-letter
// exchange: the live ones among refs, before settle takes them.
func (q *Queue) emitRejected(refs []Ref) {
	if !q.cfg.Events.On(events.MessageDeadLettered) {
		return
	}
	for _, r := range refs {
		if d, ok := q.out[r.Offset]; ok && d.claim == r.Claim {
			q.emitDied(ReasonRejected, []storage.Record{d.rec})
		}
	}
}

// countLive counts the refs that still name an outstanding delivery (what
// settle or reject will act on), without taking them.
func (q *Queue) countLive(refs []Ref) int {
	n := 0
	for _, r := range refs {
		if d, ok := q.out[r.Offset]; ok && d.claim == r.Claim {
			n++
		}
	}
	return n
}

// errStopped is the answer for a dead-lettered copy posted to a queue that
// stopped for shutdown: the source keeps the message.
var errStopped = errors.New("queue: stopped")

// DeadLetterRouter finds the queues a dead-lettered copy published to
// exchange with routing key key and raw properties props reaches. It runs
// on the source queue's actor, so it must not wait on any queue; a missing
// exchange yields no queue (the copy is dropped, as in RabbitMQ).
type DeadLetterRouter func(exchange, key string, props []byte) []*Queue

// DeadLetterHolder takes a dead-lettered copy that its exchange holds
// rather than routes (an x-delayed-message exchange and an x-delay header:
// the plugin's exchange type delays whatever it is asked to route, dead
// letters too). It returns nil when the exchange routes the copy now;
// otherwise a start that hands the copy over and calls c.Confirm with seq
// 1 once it is stored or could not be. It runs on the source queue's
// actor and must not wait on any queue.
type DeadLetterHolder func(rec storage.Record) (start func(c Confirmer))

// removeHead removes ready messages from the head while take(rec, n,
// bytes) holds, n and bytes counting those already removed, and
// dead-letters them with reason (or drops them without a DLX). Messages
// from the cursor are claimed first (index entry Returned, then the
// cursor), so until their copies are stored a crash returns them.
func (q *Queue) removeHead(ctx context.Context, reason string, take func(r *storage.Record, n int, bytes int64) bool) {
	var owned []storage.Record
	var counts []uint32 // the returned messages' delivery counts, for hold
	var bytes int64
	for len(q.returned) > 0 {
		if q.loadHead(ctx) != nil || len(q.returned) == 0 {
			break
		}
		w := q.waiting[q.returned[0]]
		if !take(&w.rec, len(owned), bytes) {
			break
		}
		delete(q.waiting, q.returned[0])
		q.returned = q.returned[1:]
		q.tookReady(&w.rec)
		owned = append(owned, w.rec)
		counts = append(counts, w.count)
		bytes += int64(len(w.rec.Body))
	}
	if len(owned) > 0 && !q.claimer.hold(ctx, owned, counts) {
		return
	}
	for len(q.returned) == 0 {
		k := 0
		for {
			if err := q.fill(ctx, k+1); err != nil || k >= len(q.pending) || k >= maxBatch {
				break
			}
			if !take(&q.pending[k], len(owned)+k, bytes) {
				break
			}
			bytes += int64(len(q.pending[k].Body))
			k++
		}
		if k == 0 {
			break
		}
		now := q.cfg.Clock.Now().UnixNano()
		entries := make([]unacked.Entry, k)
		for i := range k {
			entries[i] = q.entry(q.pending[i].Offset, Owner{}, now, 0)
			entries[i].State = q.claimer.heldState()
		}
		if err := q.claimer.commit(ctx, claimWrite{entries: entries, move: true, to: q.pending[k-1].Offset + 1, n: k}); err != nil {
			if errors.Is(err, errLostClaim) {
				q.claimer.lost(ctx, false) // another broker took the head: its turn
				break
			}
			q.cfg.Logger.Error("dead-letter claim failed", "queue", q.cfg.Name, "err", err)
			q.scheduleRetry()
			break
		}
		for i := range k {
			q.tookReady(&q.pending[i])
		}
		owned = append(owned, q.pending[:k]...)
		q.pending = q.pending[k:]
		if k < maxBatch {
			break
		}
	}
	if len(owned) > 0 {
		q.deadLetter(ctx, owned, reason)
	}
}

// deadLetter sends copies of owned messages (records this actor owns, each
// with an index entry) to the dead-letter targets, or drops them. A
// message stays in leaving until every target stored its copy.
func (q *Queue) deadLetter(ctx context.Context, recs []storage.Record, reason string) {
	q.countDeadLettered(reason, len(recs))
	q.emitDied(reason, recs)
	var drop []uint64
	now := q.cfg.Clock.Now()
	for _, r := range recs {
		targets, copyRec, hold := q.route(r, reason, now)
		if hold != nil {
			q.setLeaving(r.Offset, r)
			dl := &deadLettering{src: q, offset: r.Offset}
			dl.left.Store(1)
			hold(dl)
			continue
		}
		if len(targets) == 0 {
			drop = append(drop, r.Offset)
			continue
		}
		q.setLeaving(r.Offset, r)
		dl := &deadLettering{src: q, offset: r.Offset}
		dl.left.Store(int32(len(targets)))
		for _, t := range targets {
			switch t.post(op{kind: opPublish, rec: copyRec, conf: dl, seq: 1}) {
			case postDeleted:
				dl.Confirm([]uint64{1}, nil) // deleted meanwhile: RabbitMQ drops
			case postStopped:
				// Stopped for shutdown, its data intact: the copy was not
				// stored, so the message must stay here.
				dl.Confirm([]uint64{1}, errStopped)
			}
		}
	}
	if len(drop) > 0 {
		q.deleteOwned(ctx, drop)
	}
}

// route builds the dead-lettered copy of r and finds its target queues,
// leaving out those that would close an automatic cycle, or, when the
// dead-letter exchange holds the copy (HoldDeadLetter), returns the hold
// to start instead.
func (q *Queue) route(r storage.Record, reason string, now time.Time) ([]*Queue, storage.Record, func(Confirmer)) {
	a := q.cfg.Features.Args
	if !a.HasDLX || q.cfg.Features.DeadLetter == nil {
		return nil, storage.Record{}, nil
	}
	raw := r.Properties
	if len(raw) == 0 {
		raw = (&amqp.Properties{}).Append(nil) // a direct publish may carry none
	}
	props, err := DeadLetterProperties(raw, Death{
		Queue: q.cfg.Name, Reason: reason, Exchange: r.Exchange,
		RoutingKeys: []string{r.RoutingKey}, Time: now, DropCC: a.HasDLXKey,
		IgnoreClientDeaths: r.ClientHeaders && q.cfg.Features.IgnoreClientDeaths,
	})
	if err != nil {
		q.cfg.Logger.Error("dead-letter: bad properties", "queue", q.cfg.Name, "err", err)
		return nil, storage.Record{}, nil
	}
	key := r.RoutingKey
	if a.HasDLXKey {
		key = a.DeadLetterKey
	}
	copyRec := storage.Record{
		Exchange: a.DeadLetterExch, RoutingKey: key, Properties: props, Body: r.Body,
		Persistent: r.Persistent, Priority: r.Priority,
	}
	if h := q.cfg.Features.HoldDeadLetter; h != nil {
		if hold := h(copyRec); hold != nil {
			return nil, copyRec, hold
		}
	}
	targets := q.cfg.Features.DeadLetter(a.DeadLetterExch, key, props)
	kept := targets[:0]
	for _, t := range targets {
		if !IsDeadLetterCycle(props, reason, t.cfg.Name) {
			kept = append(kept, t)
		}
	}
	return kept, copyRec, nil
}

// deleteOwned deletes records this actor owns and their index entries:
// the record first, as settle does.
func (q *Queue) deleteOwned(ctx context.Context, offsets []uint64) {
	keys := make([]unacked.Key, len(offsets))
	for i, off := range offsets {
		keys[i] = q.indexKey(off)
	}
	if err := q.cfg.Stores.Shards.DeleteByOffsets(ctx, q.cfg.Shard, offsets); err != nil {
		// Left in place: the entry makes it come back as returned at the
		// next start (a duplicate, never a loss).
		q.cfg.Logger.Error("dead-letter delete failed", "queue", q.cfg.Name, "err", err)
		return
	}
	if err := q.cfg.Stores.Index.Delete(ctx, keys); err != nil {
		q.later().keys = append(q.later().keys, keys...)
		q.scheduleRetry()
	}
}

// deadLettered runs when every target answered for the copy of offset.
func (q *Queue) deadLettered(ctx context.Context, offset uint64, failed bool) {
	r, ok := q.unsetLeaving(offset)
	if !ok {
		return
	}
	if failed {
		// A target could not store it: the message is ready again.
		q.claimer.unhold(ctx, r)
		return
	}
	q.deleteOwned(ctx, []uint64{offset})
}

// deadLettering is the Confirmer of one dead-lettered copy: it counts the
// targets and tells the source when all of them answered.
type deadLettering struct {
	src    *Queue // nil for reject-publish-dlx: nothing to delete
	offset uint64
	left   atomic.Int32
	failed atomic.Bool
}

func (d *deadLettering) Confirm(seqs []uint64, err error) {
	// A target that refused the copy because it is full drops it, as
	// RabbitMQ's at-most-once dead-lettering does; a store error keeps it.
	if err != nil && !errors.Is(err, ErrRejected) && !errors.Is(err, ErrDeleted) {
		d.failed.Store(true)
	}
	if d.left.Add(-int32(len(seqs))) == 0 && d.src != nil {
		d.src.post(op{kind: opDeadLettered, seq: d.offset, failed: d.failed.Load()})
	}
}

// reject settles deliveries without requeue: dead-lettered with reason
// rejected when the queue has a DLX, else discarded.
func (q *Queue) reject(ctx context.Context, refs []Ref) {
	if !q.cfg.Features.Args.HasDLX {
		q.countDeadLettered(ReasonRejected, q.countLive(refs))
		q.emitRejected(refs)
		q.settle(ctx, refs)
		return
	}
	ds := q.live(refs)
	recs := make([]storage.Record, len(ds))
	for i, d := range ds {
		recs[i] = d.rec
	}
	q.recycle(ds)
	q.deadLetter(ctx, recs, ReasonRejected)
}
