package session

import (
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/vhost"
)

// publishToPlugin handles a publish to a delayed or deduplicating exchange
// (vhost.Intercept) and reports whether it did; a message it leaves alone
// is routed as any other.
//
// A held (delayed) message is confirmed once the delayed service has
// stored it, synced when it is persistent and its exchange durable, and
// nacked if that failed. It is never returned: mandatory cannot be
// honoured for a message routed later (rabbitmq-delayed-message-exchange
// documents the same). A duplicate is dropped as an unroutable message
// is: confirmed, and returned (312 NO_ROUTE) when mandatory, since the
// deduplication plugin's exchange routes it nowhere.
func (ch *Channel) publishToPlugin(m *amqp.BasicPublish, props, body []byte, sum amqp.PropertySummary, cc []string) bool {
	verdict, hold := ch.conn.vh.Intercept(m.Exchange, m.RoutingKey, cc, props, body, sum.DeliveryMode == 2)
	rec := record(m, props, body, sum)
	switch verdict {
	case vhost.Held:
		ch.conn.cfg.Counters.published(1, false)
		if ch.tx != nil {
			ch.tx.publishes = append(ch.tx.publishes, txPublish{m: *m, rec: rec, hold: hold})
			return true
		}
		if ch.confirm == nil {
			hold.Start(func(error) {})
			return true
		}
		seq := ch.confirm.publish(1)
		hold.Start(func(err error) { ch.confirm.stored(ch, seq, err != nil) })
		return true
	case vhost.Duplicate:
		ch.conn.cfg.Counters.published(0, m.Mandatory)
		if ch.tx != nil {
			ch.tx.publish(ch, m, rec, messageTTL{}, nil)
			return true
		}
		var seq uint64
		if ch.confirm != nil {
			seq = ch.confirm.publish(0)
		}
		if m.Mandatory {
			ch.returnMessage(m, rec)
		}
		if seq != 0 {
			ch.confirm.stored(ch, seq, false)
		}
		return true
	}
	return false
}
