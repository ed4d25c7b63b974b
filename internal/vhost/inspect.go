package vhost

import (
	"maps"
	"slices"
	"strings"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// This file is the vhost's read-only side for the management API,
// definitions export and tests. Each call takes the read lock for the time
// it copies what it returns, and calls no queue actor.

// ExchangeInfo is an exchange as declared: its definition and arguments.
type ExchangeInfo struct {
	Def  meta.Exchange
	Args amqp.Table
}

// defaultExchange is how the default exchange "" is listed: RabbitMQ shows
// it as a durable direct exchange ("amq.default" in its web UI).
func (v *VHost) defaultExchange() ExchangeInfo {
	return ExchangeInfo{Def: meta.Exchange{VHost: v.cfg.Name, Name: "", Type: "direct", Durable: true}}
}

// Exchanges lists every exchange, the default one ("") included, sorted
// by name. Args maps are copies at the top level; nested tables are shared
// and must be treated as read-only.
func (v *VHost) Exchanges() []ExchangeInfo {
	v.mu.RLock()
	out := make([]ExchangeInfo, 0, len(v.exchanges)+1)
	for _, x := range v.exchanges {
		out = append(out, ExchangeInfo{Def: x.def, Args: maps.Clone(x.args)})
	}
	v.mu.RUnlock()
	out = append(out, v.defaultExchange())
	slices.SortFunc(out, func(a, b ExchangeInfo) int { return strings.Compare(a.Def.Name, b.Def.Name) })
	return out
}

// LookupExchange returns the named exchange ("" is the default exchange).
func (v *VHost) LookupExchange(name string) (ExchangeInfo, bool) {
	if name == "" {
		return v.defaultExchange(), true
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	x, ok := v.exchanges[name]
	if !ok {
		return ExchangeInfo{}, false
	}
	return ExchangeInfo{Def: x.def, Args: maps.Clone(x.args)}, true
}

// Bindings lists the declared bindings, sorted by source, destination, key
// and arguments. The default exchange's implicit binding to every queue is
// not among them (the caller lists those, as RabbitMQ does, if it wants
// them). Args maps are shared with the routing table: read-only.
func (v *VHost) Bindings() []routing.Binding {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.routes.Bindings()
}

// LookupQueue returns the named queue whoever owns it: unlike Queue it
// does not refuse another connection's exclusive queue, because operators
// see (and may delete) every queue.
func (v *VHost) LookupQueue(name string) (*Queue, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	q, ok := v.queues[name]
	return q, ok
}

// SortedQueues returns the vhost's queues sorted by name.
func (v *VHost) SortedQueues() []*Queue {
	qs := v.Queues()
	slices.SortFunc(qs, func(a, b *Queue) int { return strings.Compare(a.Def.Name, b.Def.Name) })
	return qs
}
