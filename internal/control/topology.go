package control

import (
	"context"
	"fmt"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/snapshot"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/routing"
)

// Topology is the topology side of definitions.Broker: the vhosts'
// contents for Export, and the declares and binds of Import, made as an
// operator.
type Topology struct {
	Open VHosts
	// NotFound is what a missing vhost's error wraps.
	NotFound error
}

func (t Topology) VHosts() []string {
	vhs := t.Open.List()
	out := make([]string, len(vhs))
	for i, vh := range vhs {
		out[i] = vh.Name()
	}
	return out
}

func (t Topology) Contents(name string) (definitions.Contents, bool) {
	vh, ok := t.Open.Lookup(name)
	if !ok {
		return definitions.Contents{}, false
	}
	c := definitions.Contents{Exclusive: make(map[string]bool)}
	for _, x := range vh.Exchanges() {
		c.Exchanges = append(c.Exchanges, snapshot.Exchange(x))
	}
	for _, q := range vh.SortedQueues() {
		c.Queues = append(c.Queues, definitions.Queue{
			Name: q.Def.Name, VHost: vh.Name(), Durable: q.Def.Durable, AutoDelete: q.Def.AutoDelete,
			Arguments: definitions.TableJSON(q.Args),
		})
		if q.Def.Exclusive {
			c.Exclusive[q.Def.Name] = true
		}
	}
	for _, bd := range vh.Bindings() {
		c.Bindings = append(c.Bindings, definitions.BindingOf(vh.Name(), bd))
	}
	return c, true
}

// vhost finds the vhost an operator call names.
func (t Topology) vhost(name string) (*vhost.VHost, error) {
	vh, ok := t.Open.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: vhost %q", t.NotFound, name)
	}
	return vh, nil
}

func (t Topology) DeclareExchange(ctx context.Context, x definitions.Exchange, args amqp.Table) error {
	vh, err := t.vhost(x.VHost)
	if err != nil {
		return err
	}
	return vh.DeclareExchange(ctx, &amqp.ExchangeDeclare{
		Exchange: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete,
		Internal: x.Internal, Arguments: args,
	})
}

func (t Topology) DeclareQueue(ctx context.Context, q definitions.Queue, args amqp.Table) error {
	vh, err := t.vhost(q.VHost)
	if err != nil {
		return err
	}
	_, err = vh.DeclareQueue(ctx, "", &amqp.QueueDeclare{
		Queue: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: args,
	})
	return err
}

// Bind binds as an operator: as the owner of an exclusive destination
// queue (operators may bind to any queue), else as nobody.
func (t Topology) Bind(ctx context.Context, bd definitions.Binding, args amqp.Table) error {
	vh, err := t.vhost(bd.VHost)
	if err != nil {
		return err
	}
	owner := ""
	if bd.DestinationType == "queue" {
		if q, ok := vh.LookupQueue(bd.Destination); ok {
			owner = q.Def.Owner
		}
	}
	return vh.Bind(ctx, owner, routing.Binding{
		Source:      bd.Source,
		Destination: routing.Destination{Name: bd.Destination, Exchange: bd.DestinationType == "exchange"},
		Key:         bd.RoutingKey, Args: args,
	})
}
