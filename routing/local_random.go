package routing

import (
	"fmt"
	"math/rand/v2"
)

// An x-local-random exchange (RabbitMQ 4.0's
// rabbit_exchange_type_local_random) sends each message to one queue
// bound to it, picked at random among the bound queues local to the node
// the message was published on, whatever its routing key. RabbitMQ binds
// it only with the empty key and only to a classic queue; which queues are
// local, and which are classic, is the broker's knowledge: a Table holds
// the queues of one node, so every queue it routes to is local.

// checkLocalRandom applies RabbitMQ's validate_binding for the kind, as
// far as routing can see: the key must be empty, and the destination a
// queue (an exchange is no queue, and RabbitMQ's lookup of it fails).
func checkLocalRandom(b *Binding) error {
	if b.Key != "" {
		return fmt.Errorf("%w: Non empty binding '%s' key not permitted", ErrInvalidBinding, b.Key)
	}
	if b.Destination.Exchange {
		return fmt.Errorf("%w: Destination not found", ErrInvalidBinding)
	}
	return nil
}

// localRandomIndexed reports whether b has a place in the index: a binding
// indexed again after its source changed kind (a store written by another
// version) may not fit, and then routes nothing, as RabbitMQ matches only
// the empty key and only queues.
func localRandomIndexed(b *binding) bool {
	return b.Key == "" && b.destX == nil
}

// routeLocalRandom appends one of x's queues, picked at random, to dst.
// The pick uses math/rand/v2's global source, safe for concurrent use:
// Route still writes nothing of the Table's.
func (w *walk) routeLocalRandom(x *exchange, dst []string) []string {
	items := x.random.items
	if len(items) == 0 {
		return dst
	}
	w.hits++
	w.queueLists++
	return append(dst, items[rand.IntN(len(items))].queue)
}
