package routing

import "slices"

// walk is the state of one Route call besides the list of exchanges
// reached. It lives on Route's stack frame: nothing in the Table is written
// while routing, which is what lets Route run under a read lock.
//
// The list of exchanges reached ("seen") is passed along and returned
// rather than kept in walk, so that escape analysis can leave its first
// backing array on Route's stack.
type walk struct {
	// seenSet indexes seen once it is long (a fanout to many exchanges), so
	// the membership test stays O(1); nil until then.
	seenSet map[*exchange]struct{}
	// hits counts destinations (queues or exchanges) matched by the
	// exchange being routed; zero means it falls back to its alternate.
	hits int
	// queueLists counts the destination lists that contributed queues. Each
	// list is duplicate-free, so with one list the result needs no
	// deduplication.
	queueLists int
}

const seenSetThreshold = 32

// visit adds x to seen, the exchanges reached, unless it is there already.
// seen is also the work list: Route processes it front to back, so every
// exchange routes at most once and e2e cycles end.
func (w *walk) visit(seen []*exchange, x *exchange) []*exchange {
	if w.seenSet != nil {
		if _, ok := w.seenSet[x]; ok {
			return seen
		}
		w.seenSet[x] = struct{}{}
	} else {
		if slices.Contains(seen, x) {
			return seen
		}
		if len(seen) >= seenSetThreshold {
			w.seenSet = make(map[*exchange]struct{}, 2*len(seen))
			for _, s := range seen {
				w.seenSet[s] = struct{}{}
			}
			w.seenSet[x] = struct{}{}
		}
	}
	return append(seen, x)
}

// collect appends l's queues to dst and l's exchanges to seen.
func (w *walk) collect(l *destList, dst []string, seen []*exchange) ([]string, []*exchange) {
	if len(l.items) == 0 {
		return dst, seen
	}
	w.hits += len(l.items)
	queues := false
	for i := range l.items {
		d := &l.items[i]
		if d.x != nil {
			seen = w.visit(seen, d.x)
		} else {
			dst = append(dst, d.queue)
			queues = true
		}
	}
	if queues {
		w.queueLists++
	}
	return dst, seen
}

// Route appends to dst the name of every queue a message published to the
// exchange name with routing key key and headers headers reaches, each queue
// once, in no particular order, and returns the extended slice. A missing
// exchange routes nowhere. Route does not check Internal: refusing a
// publish to an internal exchange is the broker's job.
//
// headers is the message's headers table; an amqp.Table converts to it for
// free (map[string]any(tbl)). Only headers exchanges read it, and nil is an
// empty table.
//
// Route follows exchange-to-exchange bindings, each exchange at most once
// per call, so cycles end. An exchange whose own bindings match nothing
// (no queue and no exchange) passes the message to its alternate exchange,
// which is then routed like any other reached exchange (RabbitMQ's
// rabbit_exchange:route1). AlternateExchange "" means none, so the default
// exchange is never an alternate.
//
// Route only reads the table: any number of Route calls may run at once
// with each other and with the other read methods, but not with a
// mutation. It does not allocate for direct, fanout and topic exchanges
// when dst has room, except for keys of many words or walks through many
// exchanges.
func (t *Table) Route(name, key string, headers map[string]any, dst []string) []string {
	m := Message{Headers: headers}
	return t.route(name, key, nil, &m, dst)
}

// RouteKeys is Route for a message with several routing keys: key and the
// keys in more (RabbitMQ's sender-selected distribution, the CC and BCC
// headers). Each exchange reached applies its bindings to every key, as
// RabbitMQ 3.13's rabbit_exchange:route does with a delivery's list of
// routing keys: a queue is listed once however many keys reach it, and an
// exchange passes the message to its alternate only when no key matched.
func (t *Table) RouteKeys(name, key string, more []string, headers map[string]any, dst []string) []string {
	m := Message{Headers: headers}
	return t.route(name, key, more, &m, dst)
}

// RouteMessage is RouteKeys for a message whose properties a hash
// exchange may read (hash-property), m; nil m is the zero Message.
func (t *Table) RouteMessage(name, key string, more []string, m *Message, dst []string) []string {
	if m == nil {
		m = &Message{}
	}
	return t.route(name, key, more, m, dst)
}

func (t *Table) route(name, key string, more []string, m *Message, dst []string) []string {
	x, ok := t.exchanges[name]
	if !ok {
		return dst
	}
	if x.isDefault {
		// AMQP 0-9-1 §3.1.3.1: the default exchange has an implicit
		// binding from every queue, by the queue's name. It has no
		// alternate exchange and no e2e bindings, so this is all.
		start := len(dst)
		if _, ok := t.queues[key]; ok {
			dst = append(dst, key)
		}
		for _, k := range more {
			if _, ok := t.queues[k]; ok && !slices.Contains(dst[start:], k) {
				dst = append(dst, k)
			}
		}
		return dst
	}
	start := len(dst)
	var seenBuf [8]*exchange
	seen := append(seenBuf[:0], x)
	var w walk
	for i := 0; i < len(seen); i++ {
		x := seen[i]
		w.hits = 0
		switch x.Kind {
		case ConsistentHash, ModulusHash:
			// One destination per message: a consistent-hash
			// exchange hashes the first routing key (RabbitMQ takes
			// the head of the list), a modulus-hash one all of them.
			dst, seen = w.routeHashed(x, key, more, m, dst, seen)
		case LocalRandom:
			// One queue per message, whatever its keys.
			dst = w.routeLocalRandom(x, dst)
		default:
			dst, seen = t.routeOne(x, key, m.Headers, dst, seen, &w)
		}
		if x.Kind == Direct || x.Kind == Topic {
			// Fanout and headers exchanges ignore the key: one pass
			// is all of their matches.
			for _, k := range more {
				dst, seen = t.routeOne(x, k, m.Headers, dst, seen, &w)
			}
		}
		if w.hits == 0 && x.AlternateExchange != "" {
			if ae, ok := t.exchanges[x.AlternateExchange]; ok {
				seen = w.visit(seen, ae)
			}
		}
	}
	if w.queueLists > 1 {
		tail := dst[start:]
		slices.Sort(tail)
		dst = dst[:start+len(slices.Compact(tail))]
	}
	return dst
}

// routeOne applies x's own bindings.
func (t *Table) routeOne(x *exchange, key string, headers map[string]any, dst []string, seen []*exchange, w *walk) ([]string, []*exchange) {
	// x is never the default exchange: Route handles a publish to it, and
	// it cannot be a binding destination or an alternate.
	switch x.Kind {
	case Direct:
		if l := x.direct[key]; l != nil {
			return w.collect(l, dst, seen)
		}
	case Fanout:
		return w.collect(&x.fanout, dst, seen)
	case Topic:
		return x.matchTopic(key, dst, seen, w)
	case Headers:
		for _, b := range x.headers {
			if !b.hm.match(headers) {
				continue
			}
			w.hits++
			if b.destX != nil {
				seen = w.visit(seen, b.destX)
			} else {
				dst = append(dst, b.Destination.Name)
				w.queueLists++
			}
		}
	}
	return dst, seen
}
