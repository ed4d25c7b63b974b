package meta

import "context"

// Policy is a policy or operator policy (RabbitMQ's runtime parameters of
// component "policy" and "operator_policy") as RabbitMQ's definitions
// file and management API carry it. Definition values are JSON's. It is
// the one Policy type: package definitions, internal/policy and the root
// package alias it. Whether a policy is an operator policy is not in it:
// the two kinds are stored apart, and every Policies method names the
// kind. The stores keep a policy in the record form EncodePolicyRecord
// writes.
type Policy struct {
	VHost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Definition map[string]any `json:"definition"`
	Priority   int            `json:"priority"`
}

// Policies stores policies (operator false) and operator policies; it is
// part of Store (every store the broker runs on keeps them). A Put of a
// policy is on disk before it returns. The store does not check a
// policy: the broker does (internal/policy).
type Policies interface {
	PutPolicy(ctx context.Context, p Policy, operator bool) error
	// DeletePolicy of a missing policy is not an error.
	DeletePolicy(ctx context.Context, vhost, name string, operator bool) error
	// ListPolicies returns the vhost's policies of that kind sorted by
	// name.
	ListPolicies(ctx context.Context, vhost string, operator bool) ([]Policy, error)
}
