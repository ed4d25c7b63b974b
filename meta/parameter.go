package meta

import (
	"context"
	"encoding/json"
)

// Parameter is a runtime parameter, RabbitMQ's rabbit_runtime_parameters
// record: a value of a component (such as "shovel" or
// "federation-upstream") named Name in VHost. Value is its JSON, opaque to
// the store; the component that owns it checks it. It is the one
// Parameter type: package definitions and the root package alias it, and
// its JSON is the definitions file's "parameters" entry, in RabbitMQ's
// field order.
type Parameter struct {
	Value     json.RawMessage `json:"value"`
	VHost     string          `json:"vhost"`
	Component string          `json:"component"`
	Name      string          `json:"name"`
}

// GlobalParameter is a runtime parameter of no vhost and no component
// (RabbitMQ's global parameters, such as cluster_name); its JSON is the
// definitions file's "global_parameters" entry.
type GlobalParameter struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

// Parameters stores runtime and global parameters; it is part of Store.
// Put replaces a parameter with the same key (component, vhost and name;
// a global parameter's name); Delete of a missing one is not an error;
// every Put and Delete is durable before it returns. Policies, operator
// policies and vhost limits, which RabbitMQ also keeps as parameters, have
// their own methods and are not among these.
type Parameters interface {
	PutParameter(ctx context.Context, p Parameter) error
	DeleteParameter(ctx context.Context, component, vhost, name string) error
	// ListParameters returns the parameters of component ("" for every
	// component) in vhost ("" for every vhost), sorted by component,
	// vhost and name.
	ListParameters(ctx context.Context, component, vhost string) ([]Parameter, error)

	PutGlobalParameter(ctx context.Context, p GlobalParameter) error
	DeleteGlobalParameter(ctx context.Context, name string) error
	// ListGlobalParameters returns every global parameter sorted by name.
	ListGlobalParameters(ctx context.Context) ([]GlobalParameter, error)
}
