package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqpconv"
	"github.com/warrenmq/broker/internal/federation"
	"github.com/warrenmq/broker/internal/metrics"
	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/policy"
)

// registerFederation makes the federation-upstream and
// federation-upstream-set runtime parameters storable, each checked as
// RabbitMQ's federation plugin checks it (internal/federation), and
// builds the supervisor that runs the links of the federated exchanges
// and queues (started by startFederation, stopped first by Close).
func (b *Broker) registerFederation() error {
	a := b.Admin()
	b.federation = federation.NewSupervisor(federation.Config{
		Host: federationHost{b}, Params: a, Local: b.linkDoors(), Log: b.log,
	})
	if err := a.RegisterComponent(federation.ComponentUpstream, func(_, name string, v json.RawMessage) error {
		x, err := decodeParameter(v)
		if err != nil {
			return err
		}
		_, err = federation.ParseUpstream(name, x)
		return err
	}); err != nil {
		return err
	}
	return a.RegisterComponent(federation.ComponentUpstreamSet, func(_, name string, v json.RawMessage) error {
		x, err := decodeParameter(v)
		if err != nil {
			return err
		}
		_, err = federation.ParseUpstreamSet(name, x)
		return err
	})
}

// startFederation starts the links, once the vhosts are open; brokers
// sharing a store each run a link only while they hold its lease
// (linkPlacer).
func (b *Broker) startFederation() {
	if p, ok := b.linkPlacer(); ok {
		b.federation.PlaceWith(p)
	}
	b.federation.Start()
}

// decodeParameter reads a parameter's JSON value with numbers kept as
// json.Number, the form internal/federation's parsers take.
func decodeParameter(v json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	return x, nil
}

// federationHost is the broker as the federation links see it
// (federation.Host).
type federationHost struct{ b *Broker }

// federationKeys reads a policy match's federation keys.
func federationKeys(m policy.Match) (name string, k federation.Keys, ok bool) {
	d := m.Definition()
	k.Upstream, _ = d[federation.PolicyUpstream].(string)
	k.Set, _ = d[federation.PolicyUpstreamSet].(string)
	k.Pattern, _ = d[federation.PolicyUpstreamPattern].(string)
	if k == (federation.Keys{}) {
		return "", k, false
	}
	name, op := m.Names()
	if name == "" {
		name = op
	}
	return name, k, true
}

// Targets lists the exchanges and queues a policy federates, in the
// vhosts named: not the default exchange, an internal exchange or an
// exclusive queue (rabbit_federation_upstream:federate).
func (h federationHost) Targets(vhosts []string) []federation.Target {
	var out []federation.Target
	for _, name := range vhosts {
		vh, ok := h.b.lookupVHost(name)
		if !ok {
			continue
		}
		for _, x := range vh.Exchanges() {
			if x.Def.Name == "" || x.Def.Internal {
				continue
			}
			pol, keys, ok := federationKeys(vh.ExchangePolicy(x.Def.Name))
			if !ok {
				continue
			}
			out = append(out, federation.Target{VHost: vh.Name(), Name: x.Def.Name, Policy: pol, Keys: keys,
				Type: x.Def.Type, Durable: x.Def.Durable, AutoDelete: x.Def.AutoDelete, Args: amqpconv.FromTable(x.Args)})
		}
		for _, q := range vh.SortedQueues() {
			if q.Def.Exclusive {
				continue
			}
			pol, keys, ok := federationKeys(q.Policy())
			if !ok {
				continue
			}
			out = append(out, federation.Target{VHost: vh.Name(), Name: q.Def.Name, Queue: true, Policy: pol, Keys: keys,
				Durable: q.Def.Durable, AutoDelete: q.Def.AutoDelete, Args: amqpconv.FromTable(q.Args)})
		}
	}
	return out
}

func (h federationHost) Bindings(vhost, exchange string) []federation.Binding {
	vh, ok := h.b.lookupVHost(vhost)
	if !ok {
		return nil
	}
	var out []federation.Binding
	for _, bd := range vh.Bindings() {
		if bd.Source == exchange {
			out = append(out, federation.Binding{Key: bd.Key, Args: amqpconv.FromTable(amqp.Table(bd.Args))})
		}
	}
	return out
}

func (h federationHost) Demand(vhost, queue string) bool {
	vh, ok := h.b.lookupVHost(vhost)
	if !ok {
		return false
	}
	q, ok := vh.LookupQueue(queue)
	if !ok {
		return false
	}
	c := q.Counts()
	return c.Ready == 0 && c.Consumers > 0
}

// ClusterName is the cluster_name global parameter when one is set, as
// RabbitMQ's rabbit_nodes:cluster_name, else the node's name. Brokers
// sharing a store must give the same name (the upstream queue is named
// after it, and a link moves between them), so in shared mode the first
// to need one stores its node name as cluster_name.
func (h federationHost) ClusterName() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a := h.b.Admin()
	for try := 0; try < 2; try++ {
		if p, err := a.GetGlobalParameter(ctx, "cluster_name"); err == nil {
			var s string
			if json.Unmarshal(p.Value, &s) == nil && s != "" {
				return s
			}
			break
		}
		if try > 0 || !h.b.shared() {
			break
		}
		v, _ := json.Marshal(h.b.nodeID)
		if _, err := a.PutGlobalParameter(ctx, GlobalParameter{Name: "cluster_name", Value: v}); err != nil {
			break
		}
	}
	return h.b.nodeID
}

// FederationLinks is the management API's (mgmt.Federation).
func (v mgmtView) FederationLinks(vhost string) []mgmt.FederationLink {
	var out []mgmt.FederationLink
	for _, l := range v.b.federation.Status(vhost) {
		out = append(out, mgmt.FederationLink{
			VHost: l.VHost, Queue: l.Queue, Name: l.Name, Upstream: l.Upstream, UpstreamName: l.UpstreamName,
			ConsumerTag: l.ConsumerTag, ID: l.ID, Node: l.Node, State: l.State, Error: l.Error, LocalConnection: l.LocalConnection,
			URI: l.URI, Timestamp: l.Timestamp, Forwarded: l.Forwarded,
		})
	}
	return out
}

// RestartFederationLink is the management API's (mgmt.Federation): the
// link must be listed on node (this broker's name for one running here).
func (v mgmtView) RestartFederationLink(ctx context.Context, vhost, id, node string) (bool, error) {
	listed := false
	for _, l := range v.b.federation.Status(vhost) {
		if l.ID == id {
			listed = l.Node == node || (l.Node == "" && node == v.b.nodeID)
		}
	}
	if !listed {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, linkCallTimeout)
	defer cancel()
	return v.b.federation.Restart(ctx, vhost, id)
}

// federationMetrics is the links running here in the metrics package's
// type.
func (b *Broker) federationMetrics() []metrics.FederationLink {
	var out []metrics.FederationLink
	for _, l := range b.federation.Status("") {
		if l.Node != "" {
			continue // another member's: it reports it
		}
		kind := "exchange"
		if l.Queue {
			kind = "queue"
		}
		out = append(out, metrics.FederationLink{VHost: l.VHost, Link: kind + ":" + l.Name + ":" + l.Upstream, State: l.State, Forwarded: l.Forwarded})
	}
	return out
}
