package meta

import (
	"context"
	"encoding/json"
)

// Policy is a stored policy or operator policy (RabbitMQ's runtime
// parameters of component "policy" and "operator_policy"). Value is its
// JSON (pattern, apply-to, priority, definition), opaque to the store.
type Policy struct {
	VHost    string
	Name     string
	Operator bool
	Value    json.RawMessage
}

// Policies stores policies; it is part of Store (every store the broker
// runs on keeps them). A Put of a policy is on disk before it returns.
type Policies interface {
	PutPolicy(ctx context.Context, p Policy) error
	// DeletePolicy of a missing policy is not an error.
	DeletePolicy(ctx context.Context, vhost, name string, operator bool) error
	// ListPolicies returns the vhost's policies and operator policies,
	// each kind sorted by name.
	ListPolicies(ctx context.Context, vhost string) ([]Policy, error)
}
