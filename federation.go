package broker

import (
	"bytes"
	"encoding/json"

	"github.com/warrenmq/broker/internal/federation"
)

// registerFederation makes the federation-upstream and
// federation-upstream-set runtime parameters storable, each checked as
// RabbitMQ's federation plugin checks it (internal/federation).
func (b *Broker) registerFederation() error {
	a := b.Admin()
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
