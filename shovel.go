package broker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/warrenmq/broker/internal/metrics"
	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/shovel"
)

// registerShovel makes the shovel runtime parameter storable, checked as
// RabbitMQ's shovel plugin checks it (internal/shovel's Parse, its text
// in RabbitMQ's "Validation failed" frame), and builds the supervisor
// that runs a link for each stored one (started by startShovels).
func (b *Broker) registerShovel() error {
	b.shovels = shovel.NewSupervisor(b.Admin(), b.linkDoors(), b.log)
	return b.Admin().RegisterComponent(shovel.Component, func(_, _ string, v json.RawMessage) error {
		if _, err := shovel.Parse(v); err != nil {
			return fmt.Errorf("Validation failed\n\n%v\n", err)
		}
		return nil
	})
}

// startShovels starts the links of the stored shovels, once the vhosts
// they move messages between are open; brokers sharing a store each run
// a link only while they hold its lease (linkPlacer).
func (b *Broker) startShovels() error {
	if p, ok := b.linkPlacer(); ok {
		b.shovels.PlaceWith(p)
	}
	return b.shovels.Start(context.Background())
}

// Shovels and RestartShovel are the management API's (mgmt.Shovels).
func (v mgmtView) Shovels(vhost string) []mgmt.Shovel {
	var out []mgmt.Shovel
	for _, l := range v.b.shovels.Status(vhost) {
		d := l.Def
		out = append(out, mgmt.Shovel{VHost: l.VHost, Name: l.Name, Node: l.Node, State: l.State, Reason: l.Reason,
			SrcURI: first(d.SrcURIs), SrcQueue: d.SrcQueue, SrcExchange: d.SrcExchange, SrcKey: d.SrcExchangeKey,
			DestURI: first(d.DestURIs), DestQueue: d.DestQueue, DestExchange: d.DestExchange, DestKey: d.DestKey,
			Forwarded: l.Forwarded, Remaining: l.Remaining, Since: l.Since})
	}
	return out
}

func (v mgmtView) RestartShovel(ctx context.Context, vhost, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, linkCallTimeout)
	defer cancel()
	return v.b.shovels.Restart(ctx, vhost, name)
}

// DeleteShovel is the management API's (mgmt.Shovels): it deletes the
// parameter of a link the supervisor runs, which stops the link.
func (v mgmtView) DeleteShovel(ctx context.Context, vhost, name string) (bool, error) {
	for _, l := range v.b.shovels.Status(vhost) {
		if l.Name == name {
			return true, v.b.Admin().DeleteParameter(ctx, shovel.Component, vhost, name)
		}
	}
	return false, nil
}

// shovelMetrics is the links' status as internal/metrics reads it.
func (b *Broker) shovelMetrics() []metrics.Shovel {
	var out []metrics.Shovel
	for _, l := range b.shovels.Status("") {
		if l.Node != "" {
			continue // another member's: it reports it
		}
		out = append(out, metrics.Shovel{VHost: l.VHost, Name: l.Name, State: l.State, Forwarded: l.Forwarded, Remaining: l.Remaining})
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
