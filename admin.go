package broker

import (
	"context"
	"fmt"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/meta"
)

// The control plane's nouns are the definitions file's types, which are
// RabbitMQ's shapes: one definition of each, used by Admin, by
// definitions.Import and Export and by the management API.
type (
	// User is an account clients authenticate as: with its Password
	// (PLAIN, AMQPLAIN, HTTP basic auth), or by certificate (EXTERNAL,
	// when Options.AuthMechanisms offers it). Tags are RabbitMQ's user
	// tags ("administrator", "monitoring", "management", ...): as in
	// RabbitMQ they decide what a user may do through the management API
	// and whether MetricsOptions.Authenticate lets the user scrape;
	// AMQP and the direct Channel ignore them (permissions decide there).
	// Admin.PutUser takes either a plain Password or a PasswordHash with
	// its HashingAlgorithm, as a definitions file carries them.
	User = definitions.User

	// Permission is one user's permissions on one virtual host:
	// RabbitMQ's configure, write and read regular expressions. Each is
	// matched unanchored against an exchange or queue name, as RabbitMQ
	// does, so ".*" allows every name, "" none and "^q\." every name
	// starting "q."; anchor with ^ and $ to mean a whole name. Go's RE2
	// syntax applies (PCRE's minus backreferences and lookaround).
	// Configure is declaring and deleting exchanges and queues; Write is
	// publishing to an exchange and being a binding's destination; Read is
	// consuming, getting and purging from a queue and being a binding's
	// source.
	Permission = definitions.Permission

	// TopicPermission is a user's topic permission on one topic exchange
	// of a vhost (RabbitMQ's topic authorisation): a publish to the
	// exchange needs a routing key Write matches, a bind to it or unbind
	// from it a binding key Read matches. Both are regular expressions
	// matched unanchored ("" matches only the empty key), in which
	// {username} and {vhost} stand for the connection's user and vhost. An
	// exchange without a topic permission, and an exchange that is not of
	// type topic, are not restricted. Refusals are 403 ACCESS_REFUSED and
	// close the channel.
	TopicPermission = definitions.TopicPermission

	// Policy is a RabbitMQ policy or operator policy: the definition
	// applies to the queues and exchanges of VHost whose names Pattern (a
	// regular expression, unanchored) matches and that ApplyTo covers
	// ("queues", "classic_queues", "quorum_queues", "streams", "exchanges"
	// or "all"; "" is "all"). Of the policies that match an object, the one
	// with the highest Priority applies (equal priorities: the name that
	// sorts first).
	//
	// Definition keys and their effect are RabbitMQ 4.x's:
	// dead-letter-exchange, dead-letter-routing-key, message-ttl, expires,
	// max-length, max-length-bytes, overflow and delivery-limit on queues,
	// alternate-exchange on exchanges; see docs/policies.md for each key,
	// how it combines with a queue's arguments, and the keys accepted
	// without effect. Values are JSON's: numbers may be any Go integer type.
	Policy = definitions.Policy

	// VHost is a virtual host's metadata, as RabbitMQ keeps it, and its
	// limits. DefaultQueueType is the type ("classic", "quorum" or
	// "stream") a durable, non-exclusive, non-auto-delete queue declared in
	// the vhost without x-queue-type gets, as in RabbitMQ 3.11 and later;
	// "" for none (classic). Limits are LimitMaxConnections and
	// LimitMaxQueues.
	VHost = definitions.VHost
)

// Admin is the broker's control plane: users, vhosts, permissions, topic
// permissions, policies, operator policies and vhost limits, and the
// definitions file that carries them all. Each noun has the same verbs
// (Put creates or replaces, Get reads one, Delete removes one, List reads
// them all), each takes a context first, and each does what the
// management API's write of the same noun does, because the management
// API and definitions import are built on it: a change is stored, then
// applied to every open connection and queue it concerns, on every broker
// sharing the store.
//
// A missing user, vhost or policy is an error wrapping ErrNotFound. The
// zero Admin is not usable; get one from Broker.Admin. It is safe for
// concurrent use.
type Admin struct{ b *Broker }

// Admin returns the broker's control plane.
func (b *Broker) Admin() *Admin { return &Admin{b: b} }

// PutUser stores u, replacing a user of that name (as rabbitmqctl
// add_user would refuse and change_password would do; here one call does
// both): a plain Password is stored as a salted SHA-256 hash, or
// PasswordHash and HashingAlgorithm are stored as a definitions file
// carries them. It grants nothing: call PutPermission. A connection
// already open keeps its login.
func (a *Admin) PutUser(ctx context.Context, u User) error {
	return a.b.plane.PutUser(ctx, u)
}

// GetUser returns a stored user with its password hash and hashing
// algorithm (never a plain Password).
func (a *Admin) GetUser(ctx context.Context, name string) (User, error) {
	return a.b.plane.GetUser(ctx, name)
}

// ListUsers returns every stored user, as GetUser returns one.
func (a *Admin) ListUsers(ctx context.Context) ([]User, error) {
	return a.b.plane.ListUsers(ctx)
}

// DeleteUser deletes a user and all its permissions, then closes the
// user's open connections (direct Channels included) with 320
// CONNECTION_FORCED "user 'name' is deleted", as RabbitMQ's connection
// tracking does on its user_deleted event. A connection racing the delete
// is still refused every permission check (403) until it is closed.
func (a *Admin) DeleteUser(ctx context.Context, name string) error {
	return a.b.plane.DeleteUser(ctx, name)
}

// PutVHost creates the vhost with v's metadata, or replaces the metadata
// of an existing one (RabbitMQ's PUT /api/vhosts/{vhost}); it reports
// whether it created the vhost. A default queue type other than "",
// "classic", "quorum" and "stream" is refused; a new default applies to
// queues declared from then on. v's Limits, when it has any, are set as
// PutVHostLimit sets them (limits it does not name are left as they are).
// A new vhost grants nobody anything: call PutPermission.
func (a *Admin) PutVHost(ctx context.Context, v VHost) (created bool, err error) {
	return a.b.plane.PutVHost(ctx, v)
}

// GetVHost returns a vhost's metadata and its stored limits.
func (a *Admin) GetVHost(ctx context.Context, name string) (VHost, error) {
	return a.b.plane.GetVHost(ctx, name)
}

// ListVHosts returns every open vhost, as GetVHost returns one, sorted by
// name.
func (a *Admin) ListVHosts(ctx context.Context) ([]VHost, error) {
	return a.b.plane.ListVHosts(ctx)
}

// DeleteVHost deletes a virtual host with everything in it: its open
// connections are closed with 320 CONNECTION_FORCED, its queues (and their
// messages), exchanges and bindings are deleted, and so are all
// permissions, topic permissions, limits and policies on it. A vhost
// listed in Options.VHosts comes back, empty, at the next New.
func (a *Admin) DeleteVHost(ctx context.Context, name string) error {
	return a.b.plane.DeleteVHost(ctx, name)
}

// PutPermission grants p.User p's expressions on p.VHost (RabbitMQ's
// set_permissions), replacing what the user had there. The user and the
// vhost must exist, and each expression must compile. Open connections of
// the user on the vhost, direct Channels included, use the new
// permissions from their next check.
func (a *Admin) PutPermission(ctx context.Context, p Permission) error {
	return a.b.plane.PutPermission(ctx, p)
}

// GetPermission returns user's permissions on vhost, as PutPermission
// stored them.
func (a *Admin) GetPermission(ctx context.Context, user, vhost string) (Permission, error) {
	return a.b.plane.GetPermission(ctx, user, vhost)
}

// ListPermissions returns every stored permission.
func (a *Admin) ListPermissions(ctx context.Context) ([]Permission, error) {
	return a.b.stores.Meta.ListPermissions(ctx)
}

// DeletePermission removes user's permissions on vhost: new connections
// of the user to it are refused (530) and open ones get 403 on every
// check.
func (a *Admin) DeletePermission(ctx context.Context, user, vhost string) error {
	return a.b.plane.DeletePermission(ctx, user, vhost)
}

// PutTopicPermission stores p, replacing p.User's topic permission on
// that exchange of p.VHost; it reports whether there was none. The user
// and the vhost must exist and each expression must compile. Open
// connections of the user on the vhost use it from their next check.
func (a *Admin) PutTopicPermission(ctx context.Context, p TopicPermission) (created bool, err error) {
	return a.b.plane.PutTopicPermission(ctx, p)
}

// ListTopicPermissions returns every stored topic permission.
func (a *Admin) ListTopicPermissions(ctx context.Context) ([]TopicPermission, error) {
	return a.b.stores.Meta.ListTopicPermissions(ctx)
}

// DeleteTopicPermission removes user's topic permission on exchange of
// vhost ("" removes those on every exchange of the vhost).
func (a *Admin) DeleteTopicPermission(ctx context.Context, user, vhost, exchange string) error {
	return a.b.plane.DeleteTopicPermission(ctx, user, vhost, exchange)
}

// PutPolicy creates or replaces a policy and applies it at once to every
// matching queue and exchange, on every broker sharing the store. An
// invalid policy is refused with RabbitMQ's validation text (a
// *policy.ValidationError's message); a vhost that does not exist is an
// error wrapping ErrNotFound.
func (a *Admin) PutPolicy(ctx context.Context, p Policy) error {
	_, err := a.b.policies.Put(ctx, p, false)
	return err
}

// GetPolicy returns one policy of vhost.
func (a *Admin) GetPolicy(ctx context.Context, vhost, name string) (Policy, error) {
	return a.getPolicy(ctx, vhost, name, false)
}

// ListPolicies lists a vhost's policies sorted by name; vhost "" lists
// every vhost's.
func (a *Admin) ListPolicies(ctx context.Context, vhost string) ([]Policy, error) {
	return a.b.policies.List(ctx, vhost, false)
}

// DeletePolicy deletes a policy; the objects it applied to fall back to
// their arguments (or to the next matching policy).
func (a *Admin) DeletePolicy(ctx context.Context, vhost, name string) error {
	return a.b.policies.Delete(ctx, vhost, name, false)
}

// PutOperatorPolicy is PutPolicy for an operator policy: the limits an
// operator imposes (expires, message-ttl, max-length, max-length-bytes,
// delivery-limit, overflow, ...), which win over a queue's arguments and
// policy where they are stricter.
func (a *Admin) PutOperatorPolicy(ctx context.Context, p Policy) error {
	_, err := a.b.policies.Put(ctx, p, true)
	return err
}

// GetOperatorPolicy is GetPolicy for an operator policy.
func (a *Admin) GetOperatorPolicy(ctx context.Context, vhost, name string) (Policy, error) {
	return a.getPolicy(ctx, vhost, name, true)
}

// ListOperatorPolicies is ListPolicies for operator policies.
func (a *Admin) ListOperatorPolicies(ctx context.Context, vhost string) ([]Policy, error) {
	return a.b.policies.List(ctx, vhost, true)
}

// DeleteOperatorPolicy is DeletePolicy for an operator policy.
func (a *Admin) DeleteOperatorPolicy(ctx context.Context, vhost, name string) error {
	return a.b.policies.Delete(ctx, vhost, name, true)
}

func (a *Admin) getPolicy(ctx context.Context, vhost, name string, operator bool) (Policy, error) {
	ps, err := a.b.policies.List(ctx, canonicalVHost(vhost), operator)
	if err != nil {
		return Policy{}, err
	}
	for _, p := range ps {
		if p.Name == name {
			return p, nil
		}
	}
	return Policy{}, fmt.Errorf("broker: policy %q of vhost %q: %w", name, canonicalVHost(vhost), meta.ErrNotFound)
}

// PutVHostLimit sets one of a vhost's limits, as RabbitMQ's rabbitmqctl
// set_vhost_limits and PUT /api/vhost-limits do: name is
// LimitMaxConnections (connection.open beyond it is refused with 530
// NOT_ALLOWED; 0 refuses every connection) or LimitMaxQueues (declaring a
// new queue beyond it closes the channel with 406); a negative value is no
// limit. A stored limit overrides Options.Limits.VHostMaxConnections and
// Options.Limits.MaxQueuesPerVHost for its vhost. Open connections over a new
// connection limit stay open, as in RabbitMQ.
func (a *Admin) PutVHostLimit(ctx context.Context, vhost, name string, value int64) error {
	return a.b.plane.PutVHostLimit(ctx, vhost, name, value)
}

// ListVHostLimits returns every vhost's stored limits, by vhost and
// limit name.
func (a *Admin) ListVHostLimits(ctx context.Context) (map[string]map[string]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return a.b.limits.All(), nil
}

// DeleteVHostLimit removes one of a vhost's stored limits (rabbitmqctl
// clear_vhost_limits for one name); removing one it does not have is not
// an error.
func (a *Admin) DeleteVHostLimit(ctx context.Context, vhost, name string) error {
	return a.b.plane.DeleteVHostLimit(ctx, vhost, name)
}

// Export returns the broker's definitions in RabbitMQ's format
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
func (a *Admin) Export(ctx context.Context) (*definitions.File, error) {
	return a.b.exportDefinitions(ctx)
}

// Import applies d to the broker as RabbitMQ's import does
// (definitions.Import): every part is checked first and a file that fails
// a check changes nothing; then vhosts, users, permissions, exchanges,
// queues and bindings are created or declared, and an error while doing
// so (an inequivalent redeclare) leaves the earlier changes in place. What
// exists and is not in d is untouched.
//
// The import is one fsync, at its end, not one per entity: what it
// applied, also when part of it failed, is on disk when it returns.
func (a *Admin) Import(ctx context.Context, d *definitions.File) error {
	return a.b.importDefinitions(ctx, d)
}
