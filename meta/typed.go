package meta

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/warrenmq/broker/meta/internal/metakey"
)

// Typed is every method of Store but the cursors (Offset,
// CompareAndSwapOffset) and IsLeader, written once on a KV: each entity's
// key, record, checks and list order are here, in the nouns below, and
// nowhere in the backends. A backend embeds a *Typed made by NewTyped on
// its KV and adds the cursors; meta/memory and meta/local also wrap
// DeleteQueue, to drop the cursor they keep in memory.
//
// Lists are sorted by the entity's key fields as strings (names; a
// binding by source, destination kind, destination, routing key and
// arguments), which the Store contract does not promise but makes
// every backend answer alike.
type Typed struct {
	kv KV
	// readDurable: the KV syncs only durable batches (SyncsOnRequest).
	readDurable bool
}

// NewTyped returns the typed methods on kv.
func NewTyped(kv KV) *Typed {
	_, readDurable := kv.(SyncsOnRequest)
	return &Typed{kv: kv, readDurable: readDurable}
}

// noun is one kind of entity: how it is keyed, checked, encoded and
// ordered. Adding an entity to Store is adding a noun and its methods.
type noun[T any] struct {
	what string // for errors
	key  func(v T) []byte
	// check refuses a bad v before a put (and a delete, for bindings);
	// nil for none.
	check func(v T) error
	// durable says whether v's writes must be on disk before they return;
	// nil: every write is.
	durable func(v T) bool
	// encode writes v's record; nil: EncodeRecord.
	encode func(v T) ([]byte, error)
	order  func(a, b T) int
	// scratch, for the nouns written on every declare and bind whose
	// record is their JSON (EncodeRecord's), holds *T copies that put
	// encodes from (encodeJSON), so that a put allocates only its key and
	// record; nil: EncodeRecord.
	scratch *sync.Pool
}

func byName[T any](name func(T) string) func(a, b T) int {
	return func(a, b T) int { return cmp.Compare(name(a), name(b)) }
}

var (
	exchanges = noun[Exchange]{
		what:    "exchange",
		key:     func(e Exchange) []byte { return metakey.Name(metakey.KindExch, e.VHost, e.Name) },
		durable: func(e Exchange) bool { return e.Durable },
		order:   byName(func(e Exchange) string { return e.Name }),
		scratch: &sync.Pool{New: func() any { return new(Exchange) }},
	}
	queues = noun[Queue]{
		what:    "queue",
		key:     func(q Queue) []byte { return metakey.Name(metakey.KindQueue, q.VHost, q.Name) },
		durable: func(q Queue) bool { return q.Durable },
		order:   byName(func(q Queue) string { return q.Name }),
		scratch: &sync.Pool{New: func() any { return new(Queue) }},
	}
	bindings = noun[Binding]{
		what: "binding",
		key: func(b Binding) []byte {
			return metakey.Binding(b.VHost, b.Source, b.DestinationKind, b.Destination, b.RoutingKey, b.Arguments)
		},
		check:   checkBinding,
		durable: func(b Binding) bool { return b.Durable },
		order: func(a, b Binding) int {
			return cmp.Or(
				cmp.Compare(a.Source, b.Source),
				cmp.Compare(a.DestinationKind, b.DestinationKind),
				cmp.Compare(a.Destination, b.Destination),
				cmp.Compare(a.RoutingKey, b.RoutingKey),
				bytes.Compare(a.Arguments, b.Arguments),
			)
		},
		scratch: &sync.Pool{New: func() any { return new(Binding) }},
	}
	vhosts = noun[VHost]{
		what:  "vhost",
		key:   func(v VHost) []byte { return metakey.VHost(v.Name) },
		order: byName(func(v VHost) string { return v.Name }),
	}
	users = noun[User]{
		what:  "user",
		key:   func(u User) []byte { return metakey.User(u.Name) },
		check: func(u User) error { return checkUser(u.Name) },
		order: byName(func(u User) string { return u.Name }),
	}
	permissions = noun[Permission]{
		what:  "permission",
		key:   func(p Permission) []byte { return metakey.Perm(p.User, p.VHost) },
		check: func(p Permission) error { return checkUser(p.User) },
		order: func(a, b Permission) int { return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.VHost, b.VHost)) },
	}
	topicPermissions = noun[TopicPermission]{
		what:  "topic permission",
		key:   func(p TopicPermission) []byte { return metakey.Topic(p.User, p.VHost, p.Exchange) },
		check: func(p TopicPermission) error { return checkUser(p.User) },
		order: func(a, b TopicPermission) int {
			return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Exchange, b.Exchange))
		},
	}
	vhostLimits = noun[VHostLimit]{
		what:  "vhost limit",
		key:   func(l VHostLimit) []byte { return metakey.Limit(l.VHost, l.Name) },
		order: func(a, b VHostLimit) int { return cmp.Or(cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Name, b.Name)) },
	}
	// policies[0] are policies, policies[1] operator policies.
	policies = [2]noun[Policy]{policyNoun(false), policyNoun(true)}
	params   = noun[Parameter]{
		what: "parameter",
		key:  func(p Parameter) []byte { return metakey.Param(p.Component, p.VHost, p.Name) },
		order: func(a, b Parameter) int {
			return cmp.Or(cmp.Compare(a.Component, b.Component), cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Name, b.Name))
		},
	}
	globals = noun[GlobalParameter]{
		what:  "global parameter",
		key:   func(p GlobalParameter) []byte { return metakey.Global(p.Name) },
		order: byName(func(p GlobalParameter) string { return p.Name }),
	}
)

func policyNoun(operator bool) noun[Policy] {
	what := "policy"
	if operator {
		what = "operator policy"
	}
	return noun[Policy]{
		what:   what,
		key:    func(p Policy) []byte { return metakey.Policy(p.VHost, p.Name, operator) },
		encode: func(p Policy) ([]byte, error) { return EncodePolicyRecord(p, operator) },
		order:  byName(func(p Policy) string { return p.Name }),
	}
}

func policyKind(operator bool) *noun[Policy] {
	if operator {
		return &policies[1]
	}
	return &policies[0]
}

var errEmptyUser = Invalid(errors.New("meta: empty user name"))

func checkUser(name string) error {
	if name == "" {
		return errEmptyUser
	}
	return nil
}

// checkBinding refuses a destination kind the router would not
// understand, so that a bad binding fails when it is declared rather
// than when it routes.
func checkBinding(b Binding) error {
	switch b.DestinationKind {
	case DestinationQueue, DestinationExchange:
		return nil
	}
	return Invalid(fmt.Errorf("meta: binding destination kind %q is neither %q nor %q",
		b.DestinationKind, DestinationQueue, DestinationExchange))
}

func put[T any](ctx context.Context, t *Typed, n *noun[T], v T) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n.check != nil {
		if err := n.check(v); err != nil {
			return err
		}
	}
	var (
		val []byte
		err error
	)
	switch {
	case n.encode != nil:
		val, err = n.encode(v)
	case n.scratch != nil:
		p := n.scratch.Get().(*T)
		*p = v
		val, err = encodeJSON(p)
		var zero T
		*p = zero
		n.scratch.Put(p)
	default:
		val, err = EncodeRecord(v)
	}
	if err != nil {
		return err
	}
	durable := n.durable == nil || n.durable(v)
	one := oneRecord.Get().(*[1]Record)
	one[0] = Record{Key: n.key(v), Value: val}
	err = t.kv.Write(ctx, Batch{Set: one[:], Durable: durable})
	one[0] = Record{}
	oneRecord.Put(one)
	return err
}

// oneRecord holds the Set slices of one-record batches: a KV keeps a
// batch's keys and values, never its slices (KV.Write), so put reuses
// them.
var oneRecord = sync.Pool{New: func() any { return new([1]Record) }}

// recordEncoder is a JSON encoder on a buffer it keeps.
type recordEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var recordEncoders = sync.Pool{New: func() any {
	e := new(recordEncoder)
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

// encodeJSON is json.Marshal(*p), the record EncodeRecord writes for a
// noun other than User and Policy, encoded in a pooled buffer and copied
// out once: from a pointer, no copy of the entity is boxed.
func encodeJSON(p any) ([]byte, error) {
	e := recordEncoders.Get().(*recordEncoder)
	e.buf.Reset()
	err := e.enc.Encode(p)
	var out []byte
	if err == nil {
		b := e.buf.Bytes()
		out = bytes.Clone(b[:len(b)-1]) // Encode ends each value with '\n'
	}
	if e.buf.Cap() <= 64<<10 { // one huge record does not stay pooled
		recordEncoders.Put(e)
	}
	return out, err
}

// get reads the entity under key; a missing one is an ErrNotFound that
// names it (format and args).
func get[T any](ctx context.Context, t *Typed, n *noun[T], key []byte, format string, args ...any) (T, error) {
	var v T
	if err := ctx.Err(); err != nil {
		return v, err
	}
	b, err := t.kv.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return v, fmt.Errorf("%w: "+format, append([]any{ErrNotFound}, args...)...)
	}
	if err != nil {
		return v, err
	}
	if err := DecodeRecord(b, &v); err != nil {
		return v, fmt.Errorf("meta: corrupt %s under key %q: %w", n.what, key, err)
	}
	return v, nil
}

// del deletes the entity under key, and the keys of also. A durable
// noun's deletion is durable when the entity was, which a SyncsOnRequest
// KV is asked to know: missing, it is not deleted (also stays too).
func del[T any](ctx context.Context, t *Typed, n *noun[T], key []byte, also ...[]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	durable := true
	if n.durable != nil && t.readDurable {
		b, err := t.kv.Get(ctx, key)
		switch {
		case errors.Is(err, ErrNotFound) && len(also) == 0:
			return nil
		case errors.Is(err, ErrNotFound):
			durable = false
		case err != nil:
			return err
		default:
			var old T
			if err := DecodeRecord(b, &old); err != nil {
				return fmt.Errorf("meta: corrupt %s under key %q: %w", n.what, key, err)
			}
			durable = n.durable(old)
		}
	}
	return t.kv.Write(ctx, Batch{Delete: append([][]byte{key}, also...), Durable: durable})
}

// list returns every entity under prefix in n's order.
func list[T any](ctx context.Context, t *Typed, n *noun[T], prefix []byte) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []T{}
	err := t.kv.Scan(ctx, prefix, func(k, b []byte) error {
		var v T
		if err := DecodeRecord(b, &v); err != nil {
			return fmt.Errorf("meta: corrupt %s under key %q: %w", n.what, k, err)
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, n.order)
	return out, nil
}

// PutExchange stores e, replacing any exchange with the same vhost and
// name; durable when e is.
func (t *Typed) PutExchange(ctx context.Context, e Exchange) error { return put(ctx, t, &exchanges, e) }

// GetExchange returns the exchange or an error matching ErrNotFound.
func (t *Typed) GetExchange(ctx context.Context, vhost, name string) (Exchange, error) {
	return get(ctx, t, &exchanges, metakey.Name(metakey.KindExch, vhost, name), "exchange %q in vhost %q", name, vhost)
}

// DeleteExchange removes the exchange; a missing one is not an error.
func (t *Typed) DeleteExchange(ctx context.Context, vhost, name string) error {
	return del(ctx, t, &exchanges, metakey.Name(metakey.KindExch, vhost, name))
}

// ListExchanges returns the vhost's exchanges sorted by name.
func (t *Typed) ListExchanges(ctx context.Context, vhost string) ([]Exchange, error) {
	return list(ctx, t, &exchanges, metakey.VHostPrefix(metakey.KindExch, vhost))
}

// PutQueue stores q, durable when q is. The cursor is left alone:
// redeclaring a queue does not rewind it.
func (t *Typed) PutQueue(ctx context.Context, q Queue) error { return put(ctx, t, &queues, q) }

// GetQueue returns the queue or an error matching ErrNotFound.
func (t *Typed) GetQueue(ctx context.Context, vhost, name string) (Queue, error) {
	return get(ctx, t, &queues, metakey.Name(metakey.KindQueue, vhost, name), "queue %q in vhost %q", name, vhost)
}

// DeleteQueue removes the queue and its cursor key in one batch; a
// missing queue is not an error (its cursor still goes).
func (t *Typed) DeleteQueue(ctx context.Context, vhost, name string) error {
	return del(ctx, t, &queues, metakey.Name(metakey.KindQueue, vhost, name), metakey.Cursor(vhost, name))
}

// ListQueues returns the vhost's queues sorted by name.
func (t *Typed) ListQueues(ctx context.Context, vhost string) ([]Queue, error) {
	return list(ctx, t, &queues, metakey.VHostPrefix(metakey.KindQueue, vhost))
}

// PutBinding stores b, replacing the binding with the same key (all its
// fields but Durable); durable when b is.
func (t *Typed) PutBinding(ctx context.Context, b Binding) error { return put(ctx, t, &bindings, b) }

// DeleteBinding removes the binding with b's key; a missing one is not an
// error.
func (t *Typed) DeleteBinding(ctx context.Context, b Binding) error {
	if err := checkBinding(b); err != nil {
		return err
	}
	return del(ctx, t, &bindings, bindings.key(b))
}

// ListBindings returns the vhost's bindings.
func (t *Typed) ListBindings(ctx context.Context, vhost string) ([]Binding, error) {
	return list(ctx, t, &bindings, metakey.VHostPrefix(metakey.KindBinding, vhost))
}

// PutVHost stores v.
func (t *Typed) PutVHost(ctx context.Context, v VHost) error { return put(ctx, t, &vhosts, v) }

// GetVHost returns the vhost or an error matching ErrNotFound.
func (t *Typed) GetVHost(ctx context.Context, name string) (VHost, error) {
	return get(ctx, t, &vhosts, metakey.VHost(name), "vhost %q", name)
}

// DeleteVHost removes the vhost record. Its exchanges, queues and
// permissions are the broker's to delete first.
func (t *Typed) DeleteVHost(ctx context.Context, name string) error {
	return del(ctx, t, &vhosts, metakey.VHost(name))
}

// ListVHosts returns every vhost sorted by name.
func (t *Typed) ListVHosts(ctx context.Context) ([]VHost, error) {
	return list(ctx, t, &vhosts, metakey.KindPrefix(metakey.KindVHost))
}

// PutUser stores u. The name must not be empty.
func (t *Typed) PutUser(ctx context.Context, u User) error { return put(ctx, t, &users, u) }

// GetUser returns the user or an error matching ErrNotFound.
func (t *Typed) GetUser(ctx context.Context, name string) (User, error) {
	return get(ctx, t, &users, metakey.User(name), "user %q", name)
}

// DeleteUser removes the user; its permissions are the broker's to
// delete.
func (t *Typed) DeleteUser(ctx context.Context, name string) error {
	return del(ctx, t, &users, metakey.User(name))
}

// ListUsers returns every user sorted by name.
func (t *Typed) ListUsers(ctx context.Context) ([]User, error) {
	return list(ctx, t, &users, metakey.KindPrefix(metakey.KindUser))
}

// PutPermission stores p, keyed by user and vhost. The user must not be
// empty.
func (t *Typed) PutPermission(ctx context.Context, p Permission) error {
	return put(ctx, t, &permissions, p)
}

// GetPermission returns the user's permission on the vhost or an error
// matching ErrNotFound.
func (t *Typed) GetPermission(ctx context.Context, user, vhost string) (Permission, error) {
	return get(ctx, t, &permissions, metakey.Perm(user, vhost), "permission of user %q on vhost %q", user, vhost)
}

// DeletePermission removes the permission; a missing one is not an error.
func (t *Typed) DeletePermission(ctx context.Context, user, vhost string) error {
	return del(ctx, t, &permissions, metakey.Perm(user, vhost))
}

// ListPermissions returns every permission sorted by user, then vhost.
func (t *Typed) ListPermissions(ctx context.Context) ([]Permission, error) {
	return list(ctx, t, &permissions, metakey.KindPrefix(metakey.KindPerm))
}

// PutVHostLimit stores l keyed by vhost and name.
func (t *Typed) PutVHostLimit(ctx context.Context, l VHostLimit) error {
	return put(ctx, t, &vhostLimits, l)
}

// DeleteVHostLimit removes the limit; a missing one is not an error.
func (t *Typed) DeleteVHostLimit(ctx context.Context, vhost, name string) error {
	return del(ctx, t, &vhostLimits, metakey.Limit(vhost, name))
}

// ListVHostLimits returns every limit sorted by vhost, then name.
func (t *Typed) ListVHostLimits(ctx context.Context) ([]VHostLimit, error) {
	return list(ctx, t, &vhostLimits, metakey.KindPrefix(metakey.KindLimit))
}

// PutTopicPermission stores p keyed by user, vhost and exchange. The user
// must not be empty.
func (t *Typed) PutTopicPermission(ctx context.Context, p TopicPermission) error {
	return put(ctx, t, &topicPermissions, p)
}

// DeleteTopicPermission removes the topic permission; a missing one is
// not an error.
func (t *Typed) DeleteTopicPermission(ctx context.Context, user, vhost, exchange string) error {
	return del(ctx, t, &topicPermissions, metakey.Topic(user, vhost, exchange))
}

// ListTopicPermissions returns every topic permission sorted by user,
// vhost and exchange.
func (t *Typed) ListTopicPermissions(ctx context.Context) ([]TopicPermission, error) {
	return list(ctx, t, &topicPermissions, metakey.KindPrefix(metakey.KindTopic))
}

// PutPolicy stores p, a policy or (operator) an operator policy, in its
// record form (EncodePolicyRecord).
func (t *Typed) PutPolicy(ctx context.Context, p Policy, operator bool) error {
	return put(ctx, t, policyKind(operator), p)
}

// DeletePolicy removes a policy of that kind; a missing one is not an
// error.
func (t *Typed) DeletePolicy(ctx context.Context, vhost, name string, operator bool) error {
	return del(ctx, t, policyKind(operator), metakey.Policy(vhost, name, operator))
}

// ListPolicies returns the vhost's policies of that kind sorted by name.
func (t *Typed) ListPolicies(ctx context.Context, vhost string, operator bool) ([]Policy, error) {
	return list(ctx, t, policyKind(operator), metakey.VHostPrefix(metakey.PolicyKind(operator), vhost))
}

// PutParameter stores p, replacing the parameter with its key.
func (t *Typed) PutParameter(ctx context.Context, p Parameter) error { return put(ctx, t, &params, p) }

// DeleteParameter removes a parameter; a missing one is not an error.
func (t *Typed) DeleteParameter(ctx context.Context, component, vhost, name string) error {
	return del(ctx, t, &params, metakey.Param(component, vhost, name))
}

// ListParameters returns component's parameters in vhost ("" for any),
// one prefix scan when component is given, sorted by component, vhost
// and name.
func (t *Typed) ListParameters(ctx context.Context, component, vhost string) ([]Parameter, error) {
	ps, err := list(ctx, t, &params, metakey.ParamPrefix(component, vhost))
	if err != nil || component != "" || vhost == "" {
		return ps, err
	}
	// Every component's parameters in one vhost: the scan read them all.
	return slices.DeleteFunc(ps, func(p Parameter) bool { return p.VHost != vhost }), nil
}

// PutGlobalParameter stores p, replacing the global parameter of its name.
func (t *Typed) PutGlobalParameter(ctx context.Context, p GlobalParameter) error {
	return put(ctx, t, &globals, p)
}

// DeleteGlobalParameter removes a global parameter; a missing one is not
// an error.
func (t *Typed) DeleteGlobalParameter(ctx context.Context, name string) error {
	return del(ctx, t, &globals, metakey.Global(name))
}

// ListGlobalParameters returns every global parameter sorted by name.
func (t *Typed) ListGlobalParameters(ctx context.Context) ([]GlobalParameter, error) {
	return list(ctx, t, &globals, metakey.KindPrefix(metakey.KindGlobal))
}
