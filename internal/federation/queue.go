package federation

import (
	"context"
	"errors"
	"reflect"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// queueOnce runs one connection of a queue link, as
// rabbit_federation_queue_link does: it needs an upstream that supports
// consumer priorities, declares the upstream queue when missing (like
// the local one), and consumes from it with x-priority -1 only while the
// local queue has demand (empty, with consumers): so the upstream's own
// consumers come first, and messages move only to where they are being
// consumed. Each message is republished to the local queue through the
// default exchange.
func (l *link) queueOnce(ctx context.Context, uri string) error {
	t, up := l.target, l.up
	uc, dc, _, err := l.dial(ctx, uri)
	if err != nil {
		return err
	}
	defer dc.Close()
	defer uc.Close()
	caps, _ := uc.Properties["capabilities"].(amqp091.Table)
	if ok, _ := caps["consumer_priorities"].(bool); !ok {
		return errors.New("upstream_lacks_consumer_priorities")
	}
	ch, err := uc.Channel()
	if err != nil {
		return err
	}
	uq := up.Queue
	if err := disposable(uc, func(c *amqp091.Channel) error {
		_, err := c.QueueDeclarePassive(uq, t.Durable, t.AutoDelete, false, false, nil)
		return err
	}); err != nil {
		if code(err) != amqp091.NotFound {
			return err
		}
		if _, err := ch.QueueDeclare(uq, t.Durable, t.AutoDelete, false, false, t.Args); err != nil {
			return err
		}
	}
	noAck := up.AckMode == NoAck
	if !noAck {
		if err := ch.Qos(up.PrefetchCount, 0, false); err != nil {
			return err
		}
	}
	f, err := l.startForwarding(uc, dc, ch)
	if err != nil {
		return err
	}

	table := amqp091.Table{"uri": safeURI(uri), "queue": t.Name}
	var deliveries <-chan amqp091.Delivery
	consuming := false // a consumer is registered upstream
	// follow consumes upstream while the local queue has demand, and
	// pauses otherwise.
	follow := func() error {
		run := l.env.host.Demand(t.VHost, t.Name)
		switch {
		case run && !consuming && deliveries == nil:
			d, err := ch.Consume(uq, up.ConsumerTag, noAck, false, false, false, amqp091.Table{"x-priority": int32(-1)})
			if err != nil {
				return err
			}
			deliveries, consuming = d, true
		case !run && consuming:
			// pause: cancel; what was delivered already still
			// arrives on deliveries, which closes after it.
			if err := ch.Cancel(up.ConsumerTag, false); err != nil {
				return err
			}
			consuming = false
		}
		return nil
	}
	// Watch before the first read, so that no change falls between them.
	wake := make(chan struct{}, 1)
	unwatch := l.env.host.Watch(t.VHost, t.Name, true, wake)
	defer unwatch()
	if err := follow(); err != nil {
		return err
	}
	tick := time.NewTicker(l.env.reread)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-f.upClosed:
			return errClosed("upstream connection", e)
		case e := <-f.downClosed:
			return errClosed("local connection", e)
		case <-wake: // the local queue emptied, filled or changed consumers
			if err := follow(); err != nil {
				return err
			}
		case <-tick.C: // the safety net: a change the events missed
			if err := follow(); err != nil {
				return err
			}
		case m, ok := <-deliveries:
			if !ok {
				if consuming {
					return errors.New("upstream consumer cancelled")
				}
				// Paused and drained: the demand may have come back
				// meanwhile, with a poke that found the old
				// consumer still draining.
				deliveries = nil
				if err := follow(); err != nil {
					return err
				}
				continue
			}
			p := l.forwardPublishing(&m, queueHeaders(table, m.Redelivered, m.Exchange, m.RoutingKey, m.Headers))
			if err := l.forward(ctx, f, &m, "", t.Name, p); err != nil {
				return err
			}
		case c, ok := <-f.confirms:
			if err := l.confirmed(f, c, ok); err != nil {
				return err
			}
		}
	}
}

// queueHeaders is rabbit_federation_queue_link's update_headers: the
// first time a message moves, its exchange and routing key are kept as
// x-original-exchange and x-original-routing-key; each move prepends an
// x-received-from entry (table with redelivered and a visit-count one
// more than the entry for the same upstream it replaces), and a CC
// header becomes x-original-cc.
func queueHeaders(table amqp091.Table, redelivered bool, x, key string, h amqp091.Table) amqp091.Table {
	out := make(amqp091.Table, len(h)+3)
	for k, v := range h {
		out[k] = v
	}
	count := int64(0)
	switch been := h[ReceivedFromHeader].(type) {
	case []any:
		kept := make([]any, 0, len(been))
		for _, e := range been {
			if et, ok := e.(amqp091.Table); ok && visitMatch(et, table) {
				if n, ok := et["visit-count"]; ok {
					count = int64(hops(amqp091.Table{"hops": n}))
				}
				continue
			}
			kept = append(kept, e)
		}
		out[ReceivedFromHeader] = kept
	default:
		// None yet, or the client's (not an array), which the
		// prepend below moves under x-invalid-headers.
		out["x-original-exchange"] = x
		out["x-original-routing-key"] = key
	}
	if cc, ok := out["CC"]; ok {
		delete(out, "CC")
		out["x-original-cc"] = cc
	}
	info := amqp091.Table{"redelivered": redelivered, "visit-count": count + 1}
	for k, v := range table {
		info[k] = v
	}
	return prependTable(ReceivedFromHeader, info, out)
}

// visitMatch is visit_match: the entry names the same uri, virtual_host
// and queue as info (a key both lack matches).
func visitMatch(t, info amqp091.Table) bool {
	for _, k := range []string{"uri", "virtual_host", "queue"} {
		a, aok := t[k]
		b, bok := info[k]
		if aok != bok || (aok && !reflect.DeepEqual(a, b)) {
			return false
		}
	}
	return true
}
