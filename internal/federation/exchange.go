package federation

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// upstreamQueueName is rabbit_federation_exchange_link's
// upstream_queue_name: "federation: X -> cluster", with ":down" when the
// local exchange's name differs, or ":vhost:down" when the vhosts do.
func upstreamQueueName(ux, uvhost, cluster, dvhost, dx string) string {
	down := ""
	switch {
	case dvhost != uvhost:
		down = ":" + dvhost + ":" + dx
	case dx != ux:
		down = ":" + dx
	}
	return "federation: " + ux + " -> " + cluster + down
}

// exchangeOnce runs one connection of an exchange link, as
// rabbit_federation_exchange_link's go does: it declares on the upstream
// the exchange (when missing, like the local one), the upstream queue
// (durable, with x-expires and x-message-ttl), an internal exchange
// bound to it, and for each local binding an exchange-to-exchange
// binding from the upstream exchange; then it republishes what the
// queue receives to the local exchange, keeping the upstream bindings in
// step with the local ones, until the connection fails or ctx ends.
func (l *link) exchangeOnce(ctx context.Context, uri string) error {
	t, up := l.target, l.up
	uc, dc, uvhost, err := l.dial(ctx, uri)
	if err != nil {
		return err
	}
	defer dc.Close()
	defer uc.Close()
	ucluster, _ := uc.Properties["cluster_name"].(string)
	cluster := l.env.host.ClusterName()

	ch, err := uc.Channel()
	if err != nil {
		return err
	}
	ux := up.Exchange
	if err := disposable(uc, func(c *amqp091.Channel) error {
		return c.ExchangeDeclarePassive(ux, t.Type, t.Durable, t.AutoDelete, t.Intern, false, nil)
	}); err != nil {
		if code(err) != amqp091.NotFound {
			return err
		}
		if err := ch.ExchangeDeclare(ux, t.Type, t.Durable, t.AutoDelete, t.Intern, false, t.Args); err != nil {
			return err
		}
	}
	q := upstreamQueueName(ux, uvhost, cluster, t.VHost, t.Name)
	qargs := amqp091.Table{internalPurposeArg: "federation"}
	if up.Expires > 0 {
		qargs["x-expires"] = up.Expires
	}
	if up.MessageTTL >= 0 {
		qargs["x-message-ttl"] = up.MessageTTL
	}
	if _, err := ch.QueueDeclare(q, true, false, false, false, qargs); err != nil {
		return err
	}
	noAck := up.AckMode == NoAck
	if !noAck {
		if err := ch.Qos(up.PrefetchCount, 0, false); err != nil {
			return err
		}
	}
	deliveries, err := ch.Consume(q, "", noAck, false, false, false, nil)
	if err != nil {
		return err
	}
	cmd := ch
	if !up.SingleChannel {
		if cmd, err = uc.Channel(); err != nil {
			return err
		}
	}

	// ensure_upstream_bindings: a fresh internal exchange under the
	// other suffix, the local bindings on it, then the old one deleted.
	old := l.suffix
	suffix := "B"
	if old == "B" {
		suffix = "A"
	}
	intX := q + " " + suffix
	if err := l.declareInternal(ctx, uc, ch, uri, uvhost, intX); err != nil {
		return err
	}
	if err := ch.QueueBind(q, "", intX, false, nil); err != nil {
		return err
	}
	l.suffix = suffix
	// Watch before the first read, so that no change falls between them.
	wake := make(chan struct{}, 1)
	unwatch := l.env.host.Watch(t.VHost, t.Name, false, wake)
	defer unwatch()
	info := amqp091.Table{"cluster-name": cluster, "vhost": t.VHost, "exchange": t.VHost + ":" + t.Name + " " + suffix}
	bound := map[string]Binding{}
	sync := func() error {
		want := map[string]Binding{}
		for _, b := range l.env.host.Bindings(t.VHost, t.Name) {
			args, ok := bindingArgs(b.Args, up.MaxHops, ucluster, uvhost, info)
			if !ok {
				continue
			}
			want[bindingID(b.Key, args)] = Binding{Key: b.Key, Args: args}
		}
		for id, b := range want {
			if _, ok := bound[id]; !ok {
				if err := cmd.ExchangeBind(intX, b.Key, ux, false, b.Args); err != nil {
					return err
				}
				bound[id] = b
			}
		}
		for id, b := range bound {
			if _, ok := want[id]; !ok {
				if err := cmd.ExchangeUnbind(intX, b.Key, ux, false, b.Args); err != nil {
					return err
				}
				delete(bound, id)
			}
		}
		return nil
	}
	if err := sync(); err != nil {
		return err
	}
	_ = disposable(uc, func(c *amqp091.Channel) error { return c.ExchangeDelete(q+" "+old, false, false) })

	f, err := l.startForwarding(uc, dc, ch)
	if err != nil {
		return err
	}

	tick := time.NewTicker(l.env.reread)
	defer tick.Stop()
	uheader := amqp091.Table{"uri": safeURI(uri), "exchange": t.Name}
	for {
		select {
		case <-ctx.Done():
			if l.cleanup.Load() && !up.CleanupNever {
				// A clean stop: the upstream's queue and internal
				// exchange go, as RabbitMQ's terminate does.
				_ = disposable(uc, func(c *amqp091.Channel) error {
					_, err := c.QueueDelete(q, false, false, false)
					return err
				})
				_ = disposable(uc, func(c *amqp091.Channel) error { return c.ExchangeDelete(intX, false, false) })
			}
			return ctx.Err()
		case e := <-f.upClosed:
			return errClosed("upstream connection", e)
		case e := <-f.downClosed:
			return errClosed("local connection", e)
		case <-wake: // a binding of the exchange changed
			if err := sync(); err != nil {
				return err
			}
		case <-tick.C: // the safety net: a change the events missed
			if err := sync(); err != nil {
				return err
			}
		case m, ok := <-deliveries:
			if !ok {
				return errors.New("upstream consumer cancelled")
			}
			if !ShouldForward(m.Headers, up.MaxHops, cluster, t.VHost) {
				// Dropped, but acknowledged (forward's ForwardFun false).
				if !noAck {
					if err := m.Ack(false); err != nil {
						return err
					}
				}
				continue
			}
			h := amqp091.Table{}
			for k, v := range uheader {
				h[k] = v
			}
			h["redelivered"] = m.Redelivered
			if ucluster != "" {
				h["cluster-name"] = ucluster
			}
			h["vhost"] = uvhost
			p := l.forwardPublishing(&m, prependTable(ReceivedFromHeader, h, m.Headers))
			if err := l.forward(ctx, f, &m, t.Name, m.RoutingKey, p); err != nil {
				return err
			}
		case c, ok := <-f.confirms:
			if err := l.confirmed(f, c, ok); err != nil {
				return err
			}
		}
	}
}

// declareInternal is ensure_internal_exchange: the internal exchange
// intX, deleted first, then declared as RabbitMQ's x-federation-upstream
// type (a fanout that drops what would exceed max-hops or loop back) on
// a connection of its own; an upstream without that type (no
// federation plugin) refuses it (RabbitMQ 3.10 with 503, from 3.13.3
// with 406) and gets a plain fanout. x-max-hops is a long (64-bit), as
// the type requires. Warren has the type (a fanout).
func (l *link) declareInternal(ctx context.Context, uc *amqp091.Connection, ch *amqp091.Channel, uri, uvhost, intX string) error {
	_ = disposable(uc, func(c *amqp091.Channel) error { return c.ExchangeDelete(intX, false, false) })
	xargs := amqp091.Table{
		maxHopsArg: int64(l.up.MaxHops), downstreamNameArg: l.env.host.ClusterName(),
		downstreamVHostArg: l.target.VHost, internalPurposeArg: "federation",
	}
	c2, _, _, err := l.dialUpstreamOnly(ctx, uri, uvhost)
	if err != nil {
		return err
	}
	defer c2.Close()
	err = disposable(c2, func(c *amqp091.Channel) error {
		return c.ExchangeDeclare(intX, "x-federation-upstream", true, true, true, false, xargs)
	})
	switch code(err) {
	case 0:
		return nil
	case amqp091.CommandInvalid, amqp091.PreconditionFailed:
		return ch.ExchangeDeclare(intX, "fanout", true, true, true, false, amqp091.Table{internalPurposeArg: "federation"})
	}
	return err
}

// bindingID is a binding's identity in the upstream: its key and
// arguments (RabbitMQ's key/1).
func bindingID(key string, args amqp091.Table) string {
	b, _ := json.Marshal(args)
	return key + "\x00" + string(b)
}
