package definitions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/policy"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// Admin is the control plane Export reads and Import writes, in this
// package's nouns with one verb set: List and Get read, Put creates or
// replaces. The root package's *broker.Admin implements it. Vhost names
// are canonical: "" and "/" both name the default vhost; a vhost of ""
// in ListPolicies and ListOperatorPolicies means every vhost.
type Admin interface {
	// ListUsers lists the stored users with their password hashes and
	// hashing algorithms as a file carries them; GetUser returns one.
	ListUsers(ctx context.Context) ([]User, error)
	GetUser(ctx context.Context, name string) (User, error)
	// PutUser stores u (its hash with its algorithm, or a hash of its
	// plain Password), replacing a user of that name.
	PutUser(ctx context.Context, u User) error
	// ListPermissions lists the stored permissions; PutPermission stores
	// p, replacing the user's permissions on the vhost.
	ListPermissions(ctx context.Context) ([]Permission, error)
	PutPermission(ctx context.Context, p Permission) error
	// GetVHost returns a vhost's metadata and limits (no Metadata
	// object). PutVHost creates a vhost with v's metadata, or replaces the
	// metadata of an existing one, and sets v's Limits; PutVHostLimit sets
	// one of a vhost's limits.
	GetVHost(ctx context.Context, name string) (VHost, error)
	PutVHost(ctx context.Context, v VHost) (created bool, err error)
	PutVHostLimit(ctx context.Context, vhost, name string, value int64) error
	// ListTopicPermissions lists the stored topic permissions;
	// PutTopicPermission stores p, replacing the user's topic permission
	// on that exchange of the vhost.
	ListTopicPermissions(ctx context.Context) ([]TopicPermission, error)
	PutTopicPermission(ctx context.Context, p TopicPermission) (created bool, err error)
	// ListPolicies and ListOperatorPolicies list a vhost's stored
	// policies; PutPolicy and PutOperatorPolicy store and apply p,
	// replacing a policy of the same kind and name.
	ListPolicies(ctx context.Context, vhost string) ([]Policy, error)
	PutPolicy(ctx context.Context, p Policy) error
	ListOperatorPolicies(ctx context.Context, vhost string) ([]Policy, error)
	PutOperatorPolicy(ctx context.Context, p Policy) error
	// ListParameters lists the runtime parameters of component in vhost
	// ("" for any: Export asks for every one); CheckParameter reports why
	// one could not be stored (a component nobody registered, or its
	// validator's refusal), in RabbitMQ's words; PutParameter stores one,
	// replacing a parameter of that component, vhost and name. Operator
	// policies are not among them.
	ListParameters(ctx context.Context, component, vhost string) ([]Parameter, error)
	CheckParameter(p Parameter) error
	PutParameter(ctx context.Context, p Parameter) (created bool, err error)
	// ListGlobalParameters lists the global parameters;
	// PutGlobalParameter stores one, replacing one of that name.
	ListGlobalParameters(ctx context.Context) ([]GlobalParameter, error)
	PutGlobalParameter(ctx context.Context, p GlobalParameter) (created bool, err error)
}

// Broker is what Export and Import need from a broker: its Admin, what
// its vhosts hold, the checks Import runs before it changes anything, and
// the declarations.
type Broker interface {
	Admin

	// VHosts lists the vhosts' names, sorted.
	VHosts() []string
	// Contents returns what the vhost named name holds, false when there
	// is no such vhost.
	Contents(vhost string) (Contents, bool)

	// CheckVHost reports why v's default queue type or limits could not
	// be used, nil when they can.
	CheckVHost(v VHost) error
	// CheckTopicPermission reports why p's regular expressions could not
	// be used, nil when they can.
	CheckTopicPermission(p TopicPermission) error

	// DeclareExchange, DeclareQueue and Bind declare as the AMQP methods
	// would, with the arguments already converted: an existing entity
	// declared with other properties is an error, an identical one is left
	// alone.
	DeclareExchange(ctx context.Context, x Exchange, args amqp.Table) error
	DeclareQueue(ctx context.Context, q Queue, args amqp.Table) error
	Bind(ctx context.Context, b Binding, args amqp.Table) error

	// Rules says which of RabbitMQ's export and import rules that changed
	// between releases apply: those of the release the broker copies.
	Rules() Rules
	// Skipped is told of each part of a file Import leaves out, as
	// RabbitMQ's import leaves it out with a warning in its log: what
	// names the part and says why.
	Skipped(what string)
}

// Rules are the parts of RabbitMQ's definitions export and import that
// changed between releases.
type Rules struct {
	// ExportExclusiveBindings keeps the bindings to exclusive queues in an
	// export, though the queues are left out: RabbitMQ 4.2.9 and 4.3.3 to
	// 4.4.0, whose streamed export writes every explicit binding
	// (rabbitmq-server#16734); before and after (4.4.1,
	// rabbitmq-server#17838) only the bindings of exported queues.
	ExportExclusiveBindings bool
	// SkipReservedQueueBindings makes Import skip, as it skips the queues
	// themselves, the bindings to queues whose name begins with "amq."
	// (RabbitMQ 4.4.1, rabbitmq-server#17838 and #17841). Before, such a
	// binding needs its queue, which no import creates: Import refuses a
	// file with one unless the broker has the queue.
	SkipReservedQueueBindings bool
}

// Contents is what one vhost holds, as Export writes it and Import checks
// a file against it.
type Contents struct {
	// Exchanges lists every exchange, the default ("") and the predeclared
	// (amq.*) ones included.
	Exchanges []Exchange
	// Queues lists every queue, sorted by name; Exclusive names the
	// exclusive ones among them.
	Queues    []Queue
	Exclusive map[string]bool
	// Bindings lists the declared bindings, not the default exchange's
	// implicit binding of every queue.
	Bindings []Binding
}

// Export returns b's definitions: the stored users with their salted
// password hashes and each hash's hashing_algorithm, the vhosts, the
// stored permissions, and the exchanges, queues and bindings declared in
// every vhost. Exclusive queues, the default and the predeclared
// exchanges are left out, as RabbitMQ leaves them out, and so are queues
// whose name begins with "amq." (server-named ones: RabbitMQ exports
// those that are not exclusive, and every import skips them) and the
// bindings that name a queue left out, but for the bindings to exclusive
// queues when b.Rules().ExportExclusiveBindings. The version fields are
// CompatVersion, for the caller to replace with the RabbitMQ version it
// behaves as; the product fields are left to the caller.
func Export(ctx context.Context, b Broker) (*File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rules := b.Rules()
	d := &File{
		RabbitVersion: CompatVersion, RabbitMQVersion: CompatVersion,
		Users: []User{}, VHosts: []VHost{}, Permissions: []Permission{},
		TopicPermissions: []TopicPermission{}, Parameters: []Parameter{},
		GlobalParameters: []GlobalParameter{}, Policies: []Policy{},
		Queues: []Queue{}, Exchanges: []Exchange{}, Bindings: []Binding{},
	}
	users, err := b.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	d.Users = append(d.Users, users...)
	vhosts := b.VHosts()
	for _, name := range vhosts {
		v, err := b.GetVHost(ctx, name)
		if err != nil {
			return nil, err
		}
		if v.Description != "" || len(v.Tags) > 0 || v.DefaultQueueType != "" {
			// RabbitMQ 3.13's form; a vhost without metadata keeps
			// 3.10's, its name alone.
			v.Metadata = &VHostMetadata{Description: v.Description, Tags: v.Tags, DefaultQueueType: v.DefaultQueueType}
			if v.Metadata.Tags == nil {
				v.Metadata.Tags = UserTags{}
			}
			v.Tags = v.Metadata.Tags
		}
		d.VHosts = append(d.VHosts, v)
	}
	perms, err := b.ListPermissions(ctx)
	if err != nil {
		return nil, err
	}
	d.Permissions = append(d.Permissions, perms...)
	tps, err := b.ListTopicPermissions(ctx)
	if err != nil {
		return nil, err
	}
	d.TopicPermissions = append(d.TopicPermissions, tps...)
	pols, err := b.ListPolicies(ctx, "")
	if err != nil {
		return nil, err
	}
	d.Policies = append(d.Policies, pols...)
	ops, err := b.ListOperatorPolicies(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, p := range ops {
		raw, err := OperatorPolicyParameter(p)
		if err != nil {
			return nil, fmt.Errorf("broker: definitions: operator policy %q: %w", p.Name, err)
		}
		d.Parameters = append(d.Parameters, raw)
	}
	params, err := b.ListParameters(ctx, "", "")
	if err != nil {
		return nil, err
	}
	d.Parameters = append(d.Parameters, params...)
	globals, err := b.ListGlobalParameters(ctx)
	if err != nil {
		return nil, err
	}
	d.GlobalParameters = append(d.GlobalParameters, globals...)
	for _, name := range vhosts {
		c, ok := b.Contents(name)
		if !ok {
			continue // deleted meanwhile
		}
		skipped := make(map[string]bool) // queues whose bindings are left out
		for _, q := range c.Queues {
			switch {
			case c.Exclusive[q.Name]:
				skipped[q.Name] = !rules.ExportExclusiveBindings
			case routing.IsReserved(q.Name):
				skipped[q.Name] = true
			default:
				d.Queues = append(d.Queues, q)
			}
		}
		for _, x := range c.Exchanges {
			if x.Name == "" || routing.IsReserved(x.Name) {
				continue
			}
			d.Exchanges = append(d.Exchanges, x)
		}
		for _, bd := range c.Bindings {
			if bd.DestinationType == "queue" && skipped[bd.Destination] {
				continue
			}
			d.Bindings = append(d.Bindings, bd)
		}
	}
	return d, nil
}

// Import applies d to b, as RabbitMQ's import does: it creates the vhosts
// that do not exist yet with their metadata (and replaces the metadata of
// existing ones the file gives metadata for), sets their limits, stores
// the users (their password hashes as given, with their algorithm, and
// their tags; a user that exists is replaced), sets the permissions and
// topic permissions, then declares the exchanges, the queues and the
// bindings the way the AMQP methods would (so RabbitMQ's equivalence rules
// hold: an existing entity declared with other properties is an error, an
// identical one is left alone). What already exists and is not in d is
// untouched.
//
// Password hashes are base64(salt ++ H(salt ++ password)) with a 4-byte
// salt and H named by hashing_algorithm: HashingSHA256 (the default when
// the key is missing), HashingSHA512 or the legacy HashingMD5; a plain
// "password" is hashed with SHA-256; an empty password_hash is a user that
// cannot log in with a password. Policies are set before the exchanges
// and queues are declared, operator policies (parameters of component
// operator_policy) with them, after the other runtime parameters and the
// global parameters, as RabbitMQ's import orders them; a parameter of a
// component the broker does not know (CheckParameter) fails the checks.
//
// Everything is checked before anything is applied: a file that fails the
// checks changes nothing, and the error lists every problem. The checks
// read b once; a change made by someone else between the checks and the
// apply is not seen. Errors while applying (an inequivalent redeclare, a
// store that fails) leave the earlier changes in place, as RabbitMQ's
// import does, and are all returned joined.
func Import(ctx context.Context, b Broker, d *File) error {
	if d == nil {
		return errors.New("broker: definitions: nil")
	}
	if err := check(ctx, b, d); err != nil {
		return err
	}
	var errs []error
	fail := func(what string, err error) {
		errs = append(errs, fmt.Errorf("broker: definitions: %s: %w", what, err))
	}
	have := b.VHosts()
	for _, v := range d.VHosts {
		v = v.Resolved()
		// An existing vhost keeps its metadata unless the file gives
		// some (a file written before vhosts had metadata names only).
		exists := slices.Contains(have, canonicalVHost(v.Name))
		if !exists || v.Description != "" || v.Tags != nil || v.DefaultQueueType != "" {
			md := v
			md.Limits = nil // set one by one below, each with its own error
			if _, err := b.PutVHost(ctx, md); err != nil {
				fail(fmt.Sprintf("vhost %q", v.Name), err)
				continue
			}
		}
		for _, name := range slices.Sorted(maps.Keys(v.Limits)) {
			if err := b.PutVHostLimit(ctx, v.Name, name, v.Limits[name]); err != nil {
				fail(fmt.Sprintf("limit %q of vhost %q", name, v.Name), err)
			}
		}
	}
	for _, u := range d.Users {
		if err := b.PutUser(ctx, u); err != nil {
			fail(fmt.Sprintf("user %q", u.Name), err)
		}
	}
	for _, p := range d.Permissions {
		if err := b.PutPermission(ctx, p); err != nil {
			fail(fmt.Sprintf("permission of user %q on vhost %q", p.User, p.VHost), err)
		}
	}
	for _, p := range d.TopicPermissions {
		if _, err := b.PutTopicPermission(ctx, p); err != nil {
			fail(fmt.Sprintf("topic permission of user %q on exchange %q of vhost %q", p.User, p.Exchange, p.VHost), err)
		}
	}
	ops, params, _ := operatorPolicies(d)
	for _, p := range params {
		if _, err := b.PutParameter(ctx, p); err != nil {
			fail(fmt.Sprintf("parameter %q of component %q in vhost %q", p.Name, p.Component, p.VHost), err)
		}
	}
	for _, g := range d.GlobalParameters {
		if _, err := b.PutGlobalParameter(ctx, g); err != nil {
			fail(fmt.Sprintf("global parameter %q", g.Name), err)
		}
	}
	// Policies before the queues and exchanges, as RabbitMQ imports
	// them, so that each starts with its policy applied.
	for _, set := range []struct {
		ps       []Policy
		operator bool
		what     string
	}{{d.Policies, false, "policy"}, {ops, true, "operator policy"}} {
		for _, p := range set.ps {
			p, keep := withoutLegacyKeys(p)
			if !keep {
				continue
			}
			put := b.PutPolicy
			if set.operator {
				put = b.PutOperatorPolicy
			}
			if err := put(ctx, p); err != nil {
				fail(fmt.Sprintf("%s %q in vhost %q", set.what, p.Name, p.VHost), err)
			}
		}
	}
	for _, x := range d.Exchanges {
		if routing.IsReserved(x.Name) {
			continue // predeclared; check compared it
		}
		args, err := JSONTable(x.Arguments)
		if err == nil {
			err = b.DeclareExchange(ctx, x, args)
		}
		if err != nil {
			fail(fmt.Sprintf("exchange %q in vhost %q", x.Name, x.VHost), err)
		}
	}
	rules := b.Rules()
	for _, q := range d.Queues {
		if routing.IsReserved(q.Name) {
			b.Skipped(fmt.Sprintf("queue %q in vhost %q: its name begins with 'amq.'", q.Name, q.VHost))
			continue
		}
		args, err := JSONTable(q.Arguments)
		if err == nil {
			err = b.DeclareQueue(ctx, q, args)
		}
		if err != nil {
			fail(fmt.Sprintf("queue %q in vhost %q", q.Name, q.VHost), err)
		}
	}
	for _, bd := range d.Bindings {
		if rules.SkipReservedQueueBindings && reservedQueueBinding(bd) {
			b.Skipped(fmt.Sprintf("binding %q -> queue %q in vhost %q: the queue's name begins with 'amq.'", bd.Source, bd.Destination, bd.VHost))
			continue
		}
		args, err := JSONTable(bd.Arguments)
		if err == nil {
			err = b.Bind(ctx, bd, args)
		}
		if err != nil {
			fail(fmt.Sprintf("binding %q -> %s %q in vhost %q", bd.Source, bd.DestinationType, bd.Destination, bd.VHost), err)
		}
	}
	return errors.Join(errs...)
}

// reservedQueueBinding reports whether bd binds a queue whose name begins
// with "amq.", a queue no import creates.
func reservedQueueBinding(bd Binding) bool {
	return bd.DestinationType == "queue" && routing.IsReserved(bd.Destination)
}

// canonicalVHost maps "" to "/": both name the default vhost, as the
// broker names them.
func canonicalVHost(v string) string {
	if v == "" {
		return "/"
	}
	return v
}

// check reports every part of d that b cannot honour.
func check(ctx context.Context, b Broker, d *File) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("broker: definitions: "+format, args...))
	}
	// What the broker's vhosts hold, read once.
	existing := make(map[string]*Contents)
	lookup := func(name string) (*Contents, bool) {
		name = canonicalVHost(name)
		if c, ok := existing[name]; ok {
			return c, c != nil
		}
		c, ok := b.Contents(name)
		if !ok {
			existing[name] = nil
			return nil, false
		}
		existing[name] = &c
		return &c, true
	}
	newVHosts := make(map[string]bool)
	for _, v := range d.VHosts {
		name := canonicalVHost(v.Name)
		if len(name) > 255 {
			bad("vhost %q: the name is longer than 255 bytes", v.Name)
			continue
		}
		if _, ok := lookup(name); !ok {
			newVHosts[name] = true
		}
		if err := b.CheckVHost(v.Resolved()); err != nil {
			bad("vhost %q: %v", v.Name, err)
		}
	}
	vhostOK := func(what, name string) bool {
		if _, ok := lookup(name); !ok && !newVHosts[canonicalVHost(name)] {
			bad("%s: vhost %q neither exists nor is in the file", what, name)
			return false
		}
		return true
	}
	fileUsers := make(map[string]bool, len(d.Users))
	for _, du := range d.Users {
		if du.Name == "" || len(du.Name) > 255 {
			bad("user %q: the name must be 1 to 255 bytes", du.Name)
			continue
		}
		fileUsers[du.Name] = true
		if _, err := meta.HashedUser(du); err != nil {
			bad("user %q: %v", du.Name, err)
		}
	}
	for _, p := range d.Permissions {
		if !fileUsers[p.User] && !userExists(ctx, b, p.User) {
			bad("permission of user %q: the user neither exists nor is in the file", p.User)
		}
		vhostOK(fmt.Sprintf("permission of user %q", p.User), p.VHost)
		if _, _, _, err := p.Compile(); err != nil {
			bad("permission of user %q on vhost %q: %v", p.User, p.VHost, err)
		}
	}
	for _, p := range d.TopicPermissions {
		if !fileUsers[p.User] && !userExists(ctx, b, p.User) {
			bad("topic permission of user %q: the user neither exists nor is in the file", p.User)
		}
		vhostOK(fmt.Sprintf("topic permission of user %q", p.User), p.VHost)
		if err := b.CheckTopicPermission(p); err != nil {
			bad("topic permission of user %q on exchange %q of vhost %q: %v", p.User, p.Exchange, p.VHost, err)
		}
	}
	ops, params, problems := operatorPolicies(d)
	for _, p := range problems {
		bad("%s", p)
	}
	for _, p := range params {
		what := fmt.Sprintf("parameter %q of component %q", p.Name, p.Component)
		if !vhostOK(what, p.VHost) {
			continue
		}
		if err := b.CheckParameter(p); err != nil {
			bad("%s in vhost %q: %s", what, p.VHost, policyProblem(err))
		}
	}
	for _, g := range d.GlobalParameters {
		if g.Name == "" || !json.Valid(g.Value) {
			bad("global parameter %q: needs a name and a JSON value", g.Name)
		}
	}
	for _, set := range []struct {
		ps       []Policy
		operator bool
		what     string
	}{{d.Policies, false, "policy"}, {ops, true, "operator policy"}} {
		for _, p := range set.ps {
			what := fmt.Sprintf("%s %q", set.what, p.Name)
			if !vhostOK(what, p.VHost) {
				continue
			}
			p, keep := withoutLegacyKeys(p)
			if !keep {
				continue
			}
			if _, err := policy.Check(p, set.operator); err != nil {
				bad("%s in vhost %q: %s", what, p.VHost, policyProblem(err))
			}
		}
	}
	// Exchanges and queues the bindings may name: the file's and the
	// broker's.
	exchanges := make(map[[2]string]bool)
	queues := make(map[[2]string]bool)
	for _, x := range d.Exchanges {
		what := fmt.Sprintf("exchange %q", x.Name)
		if !vhostOK(what, x.VHost) {
			continue
		}
		exchanges[[2]string{canonicalVHost(x.VHost), x.Name}] = true
		args, err := JSONTable(x.Arguments)
		if err != nil {
			bad("%s: %v", what, err)
		}
		if _, err := routing.ResolveType(x.Type, args); errors.Is(err, routing.ErrUnknownKind) {
			bad("%s: unknown type %q", what, x.Type)
		} else if err != nil {
			bad("%s: %v", what, err)
		}
		if x.Name == "" {
			bad("exchange \"\": the default exchange cannot be declared")
		} else if routing.IsReserved(x.Name) {
			// Only as the predeclared exchange is (Import skips it).
			same := false
			if c, ok := lookup(x.VHost); ok {
				i := slices.IndexFunc(c.Exchanges, func(e Exchange) bool { return e.Name == x.Name })
				same = i >= 0 && sameDeclaration(c.Exchanges[i], x)
			} else {
				// A vhost the file creates will have RabbitMQ's durable
				// predeclared exchanges.
				kind, err := routing.ParseKind(x.Type)
				for _, p := range routing.Predeclared() {
					same = same || err == nil && p.Name == x.Name && p.Kind == kind && x.Durable && !x.AutoDelete && !x.Internal
				}
			}
			if !same {
				bad("%s: amq.* names are reserved for the predeclared exchanges", what)
			}
		}
	}
	for _, q := range d.Queues {
		what := fmt.Sprintf("queue %q", q.Name)
		if !vhostOK(what, q.VHost) {
			continue
		}
		if q.Name == "" {
			bad("%s: the name is empty", what)
		}
		if routing.IsReserved(q.Name) {
			continue // skipped, as RabbitMQ skips it: no binding can count on it
		}
		queues[[2]string{canonicalVHost(q.VHost), q.Name}] = true
		if _, err := JSONTable(q.Arguments); err != nil {
			bad("%s: %v", what, err)
		}
	}
	rules := b.Rules()
	for _, bd := range d.Bindings {
		what := fmt.Sprintf("binding %q -> %q", bd.Source, bd.Destination)
		if !vhostOK(what, bd.VHost) {
			continue
		}
		if rules.SkipReservedQueueBindings && reservedQueueBinding(bd) {
			continue // skipped (Import)
		}
		vhName := canonicalVHost(bd.VHost)
		c, existingVHost := lookup(vhName)
		hasExchange := func(name string) bool {
			if existingVHost {
				return slices.ContainsFunc(c.Exchanges, func(x Exchange) bool { return x.Name == name })
			}
			// A new vhost: the default and predeclared exchanges.
			return name == "" || slices.ContainsFunc(routing.Predeclared(), func(x routing.Exchange) bool { return x.Name == name })
		}
		hasQueue := func(name string) bool {
			return existingVHost && slices.ContainsFunc(c.Queues, func(q Queue) bool { return q.Name == name })
		}
		key := func(name string) [2]string { return [2]string{vhName, name} }
		if !hasExchange(bd.Source) && !exchanges[key(bd.Source)] {
			bad("%s: no exchange %q", what, bd.Source)
		}
		switch bd.DestinationType {
		case "queue":
			if !hasQueue(bd.Destination) && !queues[key(bd.Destination)] {
				bad("%s: no queue %q", what, bd.Destination)
			}
		case "exchange":
			if !hasExchange(bd.Destination) && !exchanges[key(bd.Destination)] {
				bad("%s: no exchange %q", what, bd.Destination)
			}
		default:
			bad("%s: destination_type %q is neither \"queue\" nor \"exchange\"", what, bd.DestinationType)
		}
		if _, err := JSONTable(bd.Arguments); err != nil {
			bad("%s: %v", what, err)
		}
	}
	return errors.Join(errs...)
}

// sameDeclaration reports whether x declares what cur is (arguments aside,
// as a predeclared exchange has none to compare).
func sameDeclaration(cur, x Exchange) bool {
	return cur.Type == x.Type && cur.Durable == x.Durable && cur.AutoDelete == x.AutoDelete && cur.Internal == x.Internal
}

// userExists reports whether b stores a user of that name.
func userExists(ctx context.Context, b Broker, name string) bool {
	_, err := b.GetUser(ctx, name)
	return err == nil
}
