package auth

import "context"

// Funcs is a Backend's Authn and Authz made of an embedding program's own
// functions (as nats-server's custom authentication lets an embedder
// decide). A nil Login refuses every login; a nil authorisation func
// allows what it would decide.
type Funcs struct {
	Login    func(ctx context.Context, req Request) (Identity, error)
	VHost    func(ctx context.Context, id Identity, vhost string) (bool, error)
	Resource func(ctx context.Context, id Identity, r Resource, p Permission) (bool, error)
	Topic    func(ctx context.Context, id Identity, r Resource, p Permission, routingKey string) (bool, error)
}

// Authenticate is Funcs.Login.
func (f Funcs) Authenticate(ctx context.Context, req Request) (Identity, error) {
	if f.Login == nil {
		return Identity{}, Refuse("no login function")
	}
	return f.Login(ctx, req)
}

// VHostAccess is Funcs.VHost.
func (f Funcs) VHostAccess(ctx context.Context, id Identity, vhost string) (bool, error) {
	if f.VHost == nil {
		return true, nil
	}
	return f.VHost(ctx, id, vhost)
}

// ResourceAccess is Funcs.Resource.
func (f Funcs) ResourceAccess(ctx context.Context, id Identity, r Resource, p Permission) (bool, error) {
	if f.Resource == nil {
		return true, nil
	}
	return f.Resource(ctx, id, r, p)
}

// TopicAccess is Funcs.Topic.
func (f Funcs) TopicAccess(ctx context.Context, id Identity, r Resource, p Permission, key string) (bool, error) {
	if f.Topic == nil {
		return true, nil
	}
	return f.Topic(ctx, id, r, p, key)
}

// Hook is a one-entry Chain deciding with f.
func Hook(f Funcs) Chain { return Chain{{Name: "hook", Authn: f, Authz: f}} }
