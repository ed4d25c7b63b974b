package queue

import (
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/internal/queueargs"
	"github.com/warrenmq/broker/storage"
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
