package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/control"
	"github.com/warrenmq/broker/meta"
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
	control.Topology
	b *Broker
}

var _ definitions.Broker = definitionsView{}

// definitions is the broker as package definitions reads and changes it.
func (b *Broker) definitions() definitionsView {
	return definitionsView{b.Admin(), control.Topology{Open: &b.vhosts, NotFound: ErrNotFound}, b}
}

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
