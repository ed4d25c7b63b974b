package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/snapshot"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// exportDefinitions returns the broker's definitions in RabbitMQ's format
// (definitions.Export): the stored users with their salted password
// hashes and each hash's hashing_algorithm (what Warren hashes itself is
// rabbit_password_hashing_sha256; imported sha512 and md5 hashes keep
// theirs), the vhosts, the stored permissions, and the exchanges, queues
// and bindings declared in every vhost, except what RabbitMQ leaves out
// too (exclusive queues, predeclared exchanges), and server-named (amq.*)
// queues, which every RabbitMQ import skips. Bindings to exclusive queues
// are in it under the releases whose export has them (4.2.9, 4.3.3 to
// 4.4.0). The version fields are the RabbitMQ version the broker behaves
// as (Options.RabbitMQVersion's release, the one connection.start and
// /api/overview report); the product fields name Warren and its Version.
func (b *Broker) exportDefinitions(ctx context.Context) (*definitions.File, error) {
	d, err := definitions.Export(ctx, b.definitions())
	if err != nil {
		return nil, err
	}
	v := b.opts.profile().Version
	d.RabbitVersion, d.RabbitMQVersion = v, v
	d.ProductName, d.ProductVersion = "Warren", Version
	return d, nil
}

// importDefinitions applies d to the broker as RabbitMQ's import does
// (definitions.Import): every part is checked first and a file that fails
// a check changes nothing; then vhosts, users, permissions, exchanges,
// queues and bindings are created or declared, and an error while doing so
// (an inequivalent redeclare) leaves the earlier changes in place. What
// exists and is not in d is untouched.
//
// The import is one fsync, at its end (meta.DeferSync), not one per
// entity: a file of 100,000 durable queues was 100,000 syncs. What it
// applied, also when part of it failed, is on disk when it returns.
func (b *Broker) importDefinitions(ctx context.Context, d *definitions.File) error {
	s, ok := b.stores.Meta.(meta.Syncer)
	if !ok {
		// A store that cannot be synced later is not asked to wait.
		return definitions.Import(ctx, b.definitions(), d)
	}
	err := definitions.Import(meta.DeferSync(ctx), b.definitions(), d)
	if serr := s.Sync(context.WithoutCancel(ctx)); serr != nil {
		err = errors.Join(err, fmt.Errorf("broker: definitions: sync: %w", serr))
	}
	return err
}

// definitionsView is the broker as package definitions reads and changes
// it.
type definitionsView struct {
	*Admin
	b *Broker
}

var _ definitions.Broker = definitionsView{}

// definitions is the broker as package definitions reads and changes it.
func (b *Broker) definitions() definitionsView { return definitionsView{b.Admin(), b} }

// Rules are the definitions rules of the release Options.RabbitMQVersion
// names.
func (v definitionsView) Rules() definitions.Rules {
	p := v.b.opts.profile()
	return definitions.Rules{
		ExportExclusiveBindings:   p.ExportExclusiveBindings,
		SkipReservedQueueBindings: p.ImportSkipsReservedBindings,
	}
}

// Skipped logs what an import left out, as RabbitMQ logs a warning.
func (v definitionsView) Skipped(what string) {
	v.b.log.Warn("broker: definitions: skipped "+what, "rabbitmq_version", v.b.opts.profile().Version)
}

func (v definitionsView) VHosts() []string {
	vhs := v.b.sortedVHosts()
	out := make([]string, len(vhs))
	for i, vh := range vhs {
		out[i] = vh.Name()
	}
	return out
}

func (v definitionsView) Contents(name string) (definitions.Contents, bool) {
	vh, ok := v.b.lookupVHost(name)
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
func (v definitionsView) vhost(name string) (*vhost.VHost, error) {
	vh, ok := v.b.lookupVHost(name)
	if !ok {
		return nil, fmt.Errorf("%w: vhost %q", ErrNotFound, name)
	}
	return vh, nil
}

func (v definitionsView) DeclareExchange(ctx context.Context, x definitions.Exchange, args amqp.Table) error {
	vh, err := v.vhost(x.VHost)
	if err != nil {
		return err
	}
	return vh.DeclareExchange(ctx, &amqp.ExchangeDeclare{
		Exchange: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete,
		Internal: x.Internal, Arguments: args,
	})
}

func (v definitionsView) DeclareQueue(ctx context.Context, q definitions.Queue, args amqp.Table) error {
	vh, err := v.vhost(q.VHost)
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
func (v definitionsView) Bind(ctx context.Context, bd definitions.Binding, args amqp.Table) error {
	vh, err := v.vhost(bd.VHost)
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
