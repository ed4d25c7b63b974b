package federation

import (
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The headers and arguments federation links read and write
// (rabbit_federation.hrl).
const (
	ReceivedFromHeader = "x-received-from"
	BoundFromHeader    = "x-bound-from"
	invalidHeaders     = "x-invalid-headers"

	maxHopsArg         = "x-max-hops"
	downstreamNameArg  = "x-downstream-name"
	downstreamVHostArg = "x-downstream-vhost"
	internalPurposeArg = "x-internal-purpose"
)

// ShouldForward is rabbit_federation_util:should_forward: a message
// arriving from an upstream is republished unless its x-received-from
// array already has maxHops entries or names this broker (cluster name
// and vhost) as a hop it went through: the loop prevention of federated
// exchanges. A header that is not an array is the client's, ignored.
func ShouldForward(h amqp091.Table, maxHops int, cluster, vhost string) bool {
	a, ok := h[ReceivedFromHeader].([]any)
	if !ok {
		return true
	}
	return len(a) < maxHops && !alreadySeen(cluster, vhost, a)
}

// alreadySeen is rabbit_federation_util:already_seen: some table of the
// array has this cluster-name and vhost.
func alreadySeen(cluster, vhost string, a []any) bool {
	for _, e := range a {
		t, ok := e.(amqp091.Table)
		if !ok {
			continue
		}
		c, ok1 := t["cluster-name"].(string)
		v, ok2 := t["vhost"].(string)
		if ok1 && ok2 && c == cluster && v == vhost {
			return true
		}
	}
	return false
}

// prependTable is rabbit_basic:prepend_table_header: info goes first in
// the array header name; a header of that name that is not an array is
// moved under x-invalid-headers. h is not modified: the result is a
// copy.
func prependTable(name string, info amqp091.Table, h amqp091.Table) amqp091.Table {
	out := make(amqp091.Table, len(h)+1)
	for k, v := range h {
		out[k] = v
	}
	var prior []any
	switch x := h[name].(type) {
	case nil:
	case []any:
		prior = x
	default:
		inv, _ := h[invalidHeaders].(amqp091.Table)
		n := make(amqp091.Table, len(inv)+1)
		for k, v := range inv {
			n[k] = v
		}
		old, _ := n[name].([]any)
		n[name] = append([]any{x}, old...)
		out[invalidHeaders] = n
	}
	arr := make([]any, 0, len(prior)+1)
	arr = append(arr, info)
	out[name] = append(arr, prior...)
	return out
}

// hops is rabbit_federation_exchange_link:get_hops over a binding's
// x-bound-from table: its integer hops, 0 when it has none.
func hops(t amqp091.Table) int {
	switch n := t["hops"].(type) {
	case int8:
		return int(n)
	case uint8:
		return int(n)
	case int16:
		return int(n)
	case uint16:
		return int(n)
	case int32:
		return int(n)
	case uint32:
		return int(n)
	case int64:
		return int(n)
	case int:
		return n
	}
	return 0
}

// bindingArgs is update_binding: the arguments the upstream binding of a
// local binding with args gets, or ok false when it is not propagated
// (no hops left, or it came from the upstream itself). A binding made by
// a downstream link (an x-bound-from array) travels one hop less than it
// had, at most maxHops; one of our own gets maxHops. info names this
// side: cluster-name, vhost and "vhost:exchange suffix".
func bindingArgs(args amqp091.Table, maxHops int, upstreamCluster, upstreamVHost string, info amqp091.Table) (amqp091.Table, bool) {
	n := maxHops
	if all, ok := args[BoundFromHeader].([]any); ok && len(all) > 0 {
		prev, _ := all[0].(amqp091.Table)
		if alreadySeen(upstreamCluster, upstreamVHost, all) {
			n = 0
		} else {
			n = min(hops(prev)-1, maxHops)
		}
	}
	if n <= 0 {
		return nil, false
	}
	t := make(amqp091.Table, len(info)+1)
	for k, v := range info {
		t[k] = v
	}
	t["hops"] = int16(n)
	return prependTable(BoundFromHeader, t, args), true
}
