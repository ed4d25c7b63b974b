package snapshot

import (
	"context"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// Reader is the read half of the management model (mgmt.Reader) over the
// broker's vhosts and connections: everything but the node-wide parts
// (name, overview, node), which the broker adds.
type Reader struct {
	// LookupVHost finds a vhost by name ("" is "/").
	LookupVHost func(name string) (*vhost.VHost, bool)
	// Conns lists the open connections, sorted by ID.
	Conns func() []*session.Conn
	// Groups reports the queues' own raft groups; nil without them.
	Groups meta.Replicated
}

// Exchange is x in the definitions format, as the management API shows it.
func Exchange(x vhost.ExchangeInfo) definitions.Exchange {
	return definitions.Exchange{
		Name: x.Def.Name, VHost: x.Def.VHost, Type: x.Def.Type, Durable: x.Def.Durable,
		AutoDelete: x.Def.AutoDelete, Internal: x.Def.Internal, Arguments: definitions.TableJSON(x.Args),
	}
}

// VHost returns the canonical name of the vhost name names.
func (r Reader) VHost(name string) (string, bool) {
	vh, ok := r.LookupVHost(name)
	if !ok {
		return "", false
	}
	return vh.Name(), true
}

// Exchanges lists a vhost's exchanges, sorted by name.
func (r Reader) Exchanges(name string) []definitions.Exchange {
	vh, ok := r.LookupVHost(name)
	if !ok {
		return nil
	}
	xs := vh.Exchanges()
	out := make([]definitions.Exchange, len(xs))
	for i, x := range xs {
		out[i] = Exchange(x)
	}
	return out
}

// Exchange finds one exchange.
func (r Reader) Exchange(vhostName, name string) (definitions.Exchange, bool) {
	vh, ok := r.LookupVHost(vhostName)
	if !ok {
		return definitions.Exchange{}, false
	}
	x, ok := vh.LookupExchange(name)
	if !ok {
		return definitions.Exchange{}, false
	}
	return Exchange(x), true
}

// QueueNames lists a vhost's queues' names, sorted, asking no queue.
func (r Reader) QueueNames(name string) []string {
	vh, ok := r.LookupVHost(name)
	if !ok {
		return nil
	}
	qs := vh.SortedQueues()
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Def.Name
	}
	return out
}

// HasQueue reports whether the queue exists, whoever owns it.
func (r Reader) HasQueue(vhostName, name string) bool {
	_, ok := r.lookupQueue(vhostName, name)
	return ok
}

func (r Reader) lookupQueue(vhostName, name string) (*vhost.Queue, bool) {
	vh, ok := r.LookupVHost(vhostName)
	if !ok {
		return nil, false
	}
	return vh.LookupQueue(name)
}

// Queues lists a vhost's queues with their sampled counts, sorted by
// name; a queue deleted meanwhile is left out.
func (r Reader) Queues(ctx context.Context, name string) []mgmt.Queue {
	vh, ok := r.LookupVHost(name)
	if !ok {
		return nil
	}
	qs := vh.SortedQueues()
	groups := r.groups(ctx, vh.Name())
	out := make([]mgmt.Queue, 0, len(qs))
	for _, q := range qs {
		if mq, ok := queueView(ctx, q); ok {
			mq.Replication = groups[meta.QueueKey{VHost: mq.VHost, Name: mq.Name}]
			out = append(out, mq)
		}
	}
	return out
}

// Queue describes one queue from its sampled counts.
func (r Reader) Queue(ctx context.Context, vhostName, name string) (mgmt.Queue, bool) {
	q, ok := r.lookupQueue(vhostName, name)
	if !ok {
		return mgmt.Queue{}, false
	}
	mq, ok := queueView(ctx, q)
	if ok && r.Groups != nil {
		if g, found := r.Groups.QueueReplication(ctx, meta.QueueKey{VHost: mq.VHost, Name: mq.Name}); found {
			mq.Replication = &g
		}
	}
	return mq, ok
}

// groups is the raft state of vhost's queues that have groups, by queue;
// nil without groups.
func (r Reader) groups(ctx context.Context, vhost string) map[meta.QueueKey]*meta.QueueReplication {
	if r.Groups == nil {
		return nil
	}
	out := map[meta.QueueKey]*meta.QueueReplication{}
	for _, g := range r.Groups.QueueReplications(ctx, vhost) {
		out[g.Queue] = &g
	}
	return out
}

// queueView describes q from what it published (SampledUsage), so that
// neither a listing nor a page of the console nor one queue's GET starts
// an idle queue's actor; false when q is gone.
func queueView(ctx context.Context, q *vhost.Queue) (mgmt.Queue, bool) {
	u, ok := SampledUsage(ctx, q)
	if !ok {
		return mgmt.Queue{}, false
	}
	return mgmt.Queue{
		VHost: q.Def.VHost, Name: q.Def.Name,
		Durable: q.Def.Durable, AutoDelete: q.Def.AutoDelete, Exclusive: q.Def.Exclusive,
		Args:  q.Args,
		Ready: u.Ready, Unacked: u.Unacked, Consumers: u.Consumers, Memory: u.Memory,
		Counters: Counters(q.Counters()),
		Stream:   stream(ctx, q),
		Policy:   q.Policy(),
	}, true
}

// Counters are a queue's counters in the management API's shape (the
// broker-wide ones besides are the connections').
func Counters(c queue.CounterValues) mgmt.Counters {
	return mgmt.Counters{
		Enqueued: c.Publish, Delivered: c.Deliver, DeliveredNoAck: c.DeliverNoAck,
		Got: c.Get, GotNoAck: c.GetNoAck, Redelivered: c.Redeliver, Acked: c.Ack,
		DeadLettered: c.DeadLettered,
	}
}

// stream asks a stream's actor for its log view; nil for a queue that is
// not a stream or did not answer.
func stream(ctx context.Context, q *vhost.Queue) *mgmt.Stream {
	info, ok, err := q.StreamInfo(ctx)
	if !ok || err != nil {
		return nil
	}
	out := &mgmt.Stream{FirstOffset: info.FirstOffset, LastOffset: info.LastOffset, NextOffset: info.NextOffset, Bytes: info.Bytes, Segments: info.Segments}
	for _, rd := range info.Readers {
		out.Readers = append(out.Readers, mgmt.StreamReader{Tag: rd.Tag, Connection: rd.Owner.Connection, Channel: rd.Owner.Channel, Offset: rd.Offset})
	}
	return out
}

// Bindings lists a vhost's declared bindings.
func (r Reader) Bindings(name string) []routing.Binding {
	vh, ok := r.LookupVHost(name)
	if !ok {
		return nil
	}
	return vh.Bindings()
}

// Connections lists the open connections with their channels and
// consumers, sorted by ID.
func (r Reader) Connections() []mgmt.Connection {
	conns := r.Conns()
	out := make([]mgmt.Connection, 0, len(conns))
	for _, c := range conns {
		in := c.Info()
		mc := mgmt.Connection{
			ID: in.ID, State: in.State, User: in.User, VHost: in.VHost, ClientProperties: in.ClientProperties,
			ChannelMax: in.ChannelMax, FrameMax: in.FrameMax, Heartbeat: in.Heartbeat, ConnectedAt: in.ConnectedAt,
			RecvOct: in.RecvOct, SendOct: in.SendOct, ChannelCount: in.Channels,
			Peer: in.Peer, Local: in.Local, Direct: in.Direct,
		}
		for _, ch := range c.Channels() {
			mch := mgmt.Channel{
				Number: ch.Number, Unacked: ch.Unacked, Prefetch: ch.Prefetch, GlobalPrefetch: ch.GlobalPrefetch,
				Confirm: ch.Confirm, Unconfirmed: ch.Unconfirmed, Transactional: ch.Transactional, Closing: ch.Closing,
			}
			for _, cons := range ch.Consumers {
				mch.Consumers = append(mch.Consumers, mgmt.Consumer{
					Tag: cons.Tag, VHost: cons.Queue.Def.VHost, Queue: cons.Queue.Def.Name,
					NoAck: cons.NoAck, Exclusive: cons.Exclusive, Prefetch: cons.Prefetch,
				})
			}
			mc.Channels = append(mc.Channels, mch)
		}
		out = append(out, mc)
	}
	return out
}

// CloseConnection closes the connection with that ID with code and
// reason; one that is gone already is left alone.
func (r Reader) CloseConnection(id string, code uint16, reason string) {
	for _, c := range r.Conns() {
		if c.ID() == id {
			c.Shutdown(code, reason)
			return
		}
	}
}
