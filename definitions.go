package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// Definitions is RabbitMQ's definitions file (definitions.json, as
// rabbitmqctl export_definitions and GET /api/definitions write it in
// RabbitMQ 3.10): vhosts, users, permissions, exchanges, queues and
// bindings. Messages are not part of it.
//
// Warren exports every section; the ones it has nothing for (topic
// permissions, parameters, policies) are empty. On import it applies what
// it can honour and refuses, before changing anything, a file that asks for
// something it cannot (see ImportDefinitions).
type Definitions struct {
	// The version fields say who wrote the file; import ignores them.
	// Warren writes its own name and version as product and the RabbitMQ
	// release whose format it follows as rabbit(mq)_version.
	RabbitVersion   string `json:"rabbit_version,omitempty"`
	RabbitMQVersion string `json:"rabbitmq_version,omitempty"`
	ProductName     string `json:"product_name,omitempty"`
	ProductVersion  string `json:"product_version,omitempty"`

	Users            []DefinitionUser       `json:"users"`
	VHosts           []DefinitionVHost      `json:"vhosts"`
	Permissions      []DefinitionPermission `json:"permissions"`
	TopicPermissions []json.RawMessage      `json:"topic_permissions"`
	Parameters       []json.RawMessage      `json:"parameters"`
	GlobalParameters []json.RawMessage      `json:"global_parameters"`
	Policies         []json.RawMessage      `json:"policies"`
	Queues           []DefinitionQueue      `json:"queues"`
	Exchanges        []DefinitionExchange   `json:"exchanges"`
	Bindings         []DefinitionBinding    `json:"bindings"`
}

// DefinitionUser is a user with a salted password hash. PasswordHash is
// base64(salt ++ H(salt ++ password)) with a 4-byte salt, H named by
// HashingAlgorithm (rabbit_password_hashing_sha256, _sha512 or _md5).
// Password is the plain-text form some hand-written files use instead.
type DefinitionUser struct {
	Name             string         `json:"name"`
	PasswordHash     string         `json:"password_hash,omitempty"`
	Password         string         `json:"password,omitempty"`
	HashingAlgorithm string         `json:"hashing_algorithm,omitempty"`
	Tags             UserTags       `json:"tags"`
	Limits           map[string]any `json:"limits"`
}

// UserTags are a user's tags. They are written as a JSON list (RabbitMQ
// 3.9 and later) and read from a list or from the comma-separated string
// older releases wrote.
type UserTags []string

// MarshalJSON writes the tags as a list, [] when there are none.
func (t UserTags) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]string(t))
}

// UnmarshalJSON reads a list or a comma-separated string.
func (t *UserTags) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*t = list
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("broker: user tags are neither a list nor a string")
	}
	*t = nil
	for _, tag := range strings.Split(s, ",") {
		if tag = strings.TrimSpace(tag); tag != "" {
			*t = append(*t, tag)
		}
	}
	return nil
}

// DefinitionVHost is a virtual host.
type DefinitionVHost struct {
	Name string `json:"name"`
}

// DefinitionPermission grants a user configure, write and read regular
// expressions on a vhost.
type DefinitionPermission struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// DefinitionQueue is a queue declaration.
type DefinitionQueue struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

// DefinitionExchange is an exchange declaration.
type DefinitionExchange struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

// DefinitionBinding binds Source to a queue or exchange (DestinationType
// "queue" or "exchange").
type DefinitionBinding struct {
	Source          string         `json:"source"`
	VHost           string         `json:"vhost"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}

// opsCompatVersion is the RabbitMQ release whose management API and
// definitions format Warren follows.
const opsCompatVersion = "3.10.0"

// Hashing algorithm names as RabbitMQ writes them.
const (
	opsHashSHA256 = "rabbit_password_hashing_sha256"
	opsHashSHA512 = "rabbit_password_hashing_sha512"
	opsHashMD5    = "rabbit_password_hashing_md5"
)

// ReadDefinitions parses a definitions file. Numbers in arguments keep
// their integer type (int64) when they are whole.
func ReadDefinitions(r io.Reader) (*Definitions, error) {
	var d Definitions
	if err := opsDecodeJSON(r, &d); err != nil {
		return nil, fmt.Errorf("broker: definitions: %w", err)
	}
	return &d, nil
}

// ExportDefinitions returns the broker's definitions in RabbitMQ's format:
// the stored users with their salted password hashes and each hash's
// hashing_algorithm (what Warren hashes itself is
// rabbit_password_hashing_sha256; imported sha512 and md5 hashes keep
// theirs), the vhosts, the stored permissions, and the exchanges, queues
// and bindings declared in every vhost. Exclusive queues, server-named
// ones (amq.*) and the predeclared exchanges are left out, as RabbitMQ
// leaves them out, and so are the bindings that name them.
func (b *Broker) ExportDefinitions(ctx context.Context) (*Definitions, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := &Definitions{
		RabbitVersion: opsCompatVersion, RabbitMQVersion: opsCompatVersion,
		ProductName: "Warren", ProductVersion: Version,
		Users: []DefinitionUser{}, VHosts: []DefinitionVHost{}, Permissions: []DefinitionPermission{},
		TopicPermissions: []json.RawMessage{}, Parameters: []json.RawMessage{},
		GlobalParameters: []json.RawMessage{}, Policies: []json.RawMessage{},
		Queues: []DefinitionQueue{}, Exchanges: []DefinitionExchange{}, Bindings: []DefinitionBinding{},
	}
	// Users and permissions as stored: the stored hashes are RabbitMQ's
	// (accounts.go).
	users, err := b.stores.meta.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		d.Users = append(d.Users, userJSON(u))
	}
	vhosts := b.opsVHosts()
	for _, vh := range vhosts {
		d.VHosts = append(d.VHosts, DefinitionVHost{Name: vh.Name()})
	}
	perms, err := b.stores.meta.ListPermissions(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range perms {
		d.Permissions = append(d.Permissions, permissionJSON(p))
	}
	for _, vh := range vhosts {
		skipped := make(map[string]bool) // queues left out
		for _, q := range vh.SortedQueues() {
			if q.Def.Exclusive || routing.IsReserved(q.Def.Name) {
				skipped[q.Def.Name] = true
				continue
			}
			d.Queues = append(d.Queues, DefinitionQueue{
				Name: q.Def.Name, VHost: vh.Name(), Durable: q.Def.Durable, AutoDelete: q.Def.AutoDelete,
				Arguments: opsTableJSON(q.Args),
			})
		}
		for _, x := range vh.Exchanges() {
			if x.Def.Name == "" || routing.IsReserved(x.Def.Name) {
				continue
			}
			d.Exchanges = append(d.Exchanges, DefinitionExchange{
				Name: x.Def.Name, VHost: vh.Name(), Type: x.Def.Type, Durable: x.Def.Durable,
				AutoDelete: x.Def.AutoDelete, Internal: x.Def.Internal, Arguments: opsTableJSON(x.Args),
			})
		}
		for _, bd := range vh.Bindings() {
			if !bd.Destination.Exchange && skipped[bd.Destination.Name] {
				continue
			}
			d.Bindings = append(d.Bindings, DefinitionBinding{
				Source: bd.Source, VHost: vh.Name(), Destination: bd.Destination.Name,
				DestinationType: opsDestinationType(bd.Destination), RoutingKey: bd.Key, Arguments: opsTableJSON(bd.Args),
			})
		}
	}
	return d, nil
}

func opsDestinationType(d routing.Destination) string {
	if d.Exchange {
		return "exchange"
	}
	return "queue"
}

// ImportDefinitions applies d to the broker, as RabbitMQ's import does:
// it creates the vhosts that do not exist yet, stores the users (their
// password hashes as given, with their algorithm, and their tags; a user
// that exists is replaced), sets the permissions, then declares the
// exchanges, the queues and the bindings the way the AMQP methods would
// (so RabbitMQ's equivalence rules hold: an existing entity declared with
// other properties is an error, an identical one is left alone). What
// already exists and is not in d is untouched.
//
// Password hashes are base64(salt ++ H(salt ++ password)) with a 4-byte
// salt and H named by hashing_algorithm: rabbit_password_hashing_sha256
// (the default when the key is missing), _sha512 or the legacy _md5; a
// plain "password" is hashed with SHA-256; an empty password_hash is a
// user that cannot log in with a password. Topic permissions, parameters
// and policies must be empty; global parameters (cluster name, cluster id)
// are ignored.
//
// Everything is checked before anything is applied; a file that fails the
// checks changes nothing, and the error lists every problem. Errors while
// applying (an inequivalent redeclare) leave the earlier changes in place,
// as RabbitMQ's import does, and are all returned joined.
func (b *Broker) ImportDefinitions(ctx context.Context, d *Definitions) error {
	if d == nil {
		return errors.New("broker: definitions: nil")
	}
	users, err := b.opsCheckDefinitions(ctx, d)
	if err != nil {
		return err
	}
	var errs []error
	fail := func(what string, err error) {
		errs = append(errs, fmt.Errorf("broker: definitions: %s: %w", what, err))
	}
	for _, v := range d.VHosts {
		if _, ok := b.lookupVHost(v.Name); ok {
			continue
		}
		if err := b.AddVHost(ctx, v.Name); err != nil {
			fail(fmt.Sprintf("vhost %q", v.Name), err)
		}
	}
	for _, u := range users {
		if err := b.stores.meta.PutUser(ctx, u); err != nil {
			fail(fmt.Sprintf("user %q", u.Name), err)
		}
	}
	for _, p := range d.Permissions {
		if err := b.SetPermissions(ctx, p.User, p.VHost, Permission{Configure: p.Configure, Write: p.Write, Read: p.Read}); err != nil {
			fail(fmt.Sprintf("permission of user %q on vhost %q", p.User, p.VHost), err)
		}
	}
	for _, x := range d.Exchanges {
		vh, _ := b.lookupVHost(x.VHost)
		args, err := opsJSONTable(x.Arguments)
		if err == nil && routing.IsReserved(x.Name) {
			continue // predeclared; checkDefinitions compared it
		}
		if err == nil {
			err = vh.DeclareExchange(ctx, &amqp.ExchangeDeclare{
				Exchange: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete,
				Internal: x.Internal, Arguments: args,
			})
		}
		if err != nil {
			fail(fmt.Sprintf("exchange %q in vhost %q", x.Name, x.VHost), err)
		}
	}
	for _, q := range d.Queues {
		vh, _ := b.lookupVHost(q.VHost)
		args, err := opsJSONTable(q.Arguments)
		if err == nil {
			_, err = vh.DeclareQueue(ctx, "", &amqp.QueueDeclare{
				Queue: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: args,
			})
		}
		if err != nil {
			fail(fmt.Sprintf("queue %q in vhost %q", q.Name, q.VHost), err)
		}
	}
	for _, bd := range d.Bindings {
		vh, _ := b.lookupVHost(bd.VHost)
		args, err := opsJSONTable(bd.Arguments)
		if err == nil {
			err = vh.Bind(ctx, opsBindingOwner(vh, bd), routing.Binding{
				Source:      bd.Source,
				Destination: routing.Destination{Name: bd.Destination, Exchange: bd.DestinationType == "exchange"},
				Key:         bd.RoutingKey, Args: args,
			})
		}
		if err != nil {
			fail(fmt.Sprintf("binding %q -> %s %q in vhost %q", bd.Source, bd.DestinationType, bd.Destination, bd.VHost), err)
		}
	}
	return errors.Join(errs...)
}

// bindingOwner is the connection an operator binds as: the owner of an
// exclusive destination queue (operators may bind to any queue), else
// nobody.
func opsBindingOwner(vh *vhost.VHost, bd DefinitionBinding) string {
	if bd.DestinationType == "queue" {
		if q, ok := vh.LookupQueue(bd.Destination); ok {
			return q.Def.Owner
		}
	}
	return ""
}

// checkDefinitions reports every part of d that Warren cannot honour, and
// returns d's users as they are to be stored.
func (b *Broker) opsCheckDefinitions(ctx context.Context, d *Definitions) ([]meta.User, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("broker: definitions: "+format, args...))
	}
	newVHosts := make(map[string]bool)
	for _, v := range d.VHosts {
		name := canonicalVHost(v.Name)
		if len(name) > 255 {
			bad("vhost %q: the name is longer than 255 bytes", v.Name)
			continue
		}
		if _, ok := b.lookupVHost(name); !ok {
			newVHosts[name] = true
		}
	}
	vhostOK := func(what, name string) bool {
		if _, ok := b.lookupVHost(name); !ok && !newVHosts[canonicalVHost(name)] {
			bad("%s: vhost %q neither exists nor is in the file", what, name)
			return false
		}
		return true
	}
	var users []meta.User
	fileUsers := make(map[string]bool, len(d.Users))
	for _, du := range d.Users {
		if du.Name == "" || len(du.Name) > 255 {
			bad("user %q: the name must be 1 to 255 bytes", du.Name)
			continue
		}
		fileUsers[du.Name] = true
		var stored []byte
		var err error
		if du.PasswordHash == "" && du.Password != "" {
			stored = hashPassword(du.Password)
		} else {
			stored, err = storedHash(du.HashingAlgorithm, du.PasswordHash)
		}
		if err != nil {
			bad("user %q: %v", du.Name, err)
			continue
		}
		users = append(users, meta.User{Name: du.Name, PasswordHash: stored, Tags: slices.Clone([]string(du.Tags))})
	}
	for _, p := range d.Permissions {
		if !fileUsers[p.User] {
			if _, err := b.stores.meta.GetUser(ctx, p.User); err != nil {
				bad("permission of user %q: the user neither exists nor is in the file", p.User)
			}
		}
		vhostOK(fmt.Sprintf("permission of user %q", p.User), p.VHost)
		if _, err := compileGrant(meta.Permission{Configure: p.Configure, Write: p.Write, Read: p.Read}); err != nil {
			bad("permission of user %q on vhost %q: %v", p.User, p.VHost, err)
		}
	}
	for _, s := range []struct {
		name  string
		items []json.RawMessage
	}{{"topic_permissions", d.TopicPermissions}, {"parameters", d.Parameters}, {"policies", d.Policies}} {
		if len(s.items) > 0 {
			bad("%s: %d entries, but Warren has none of these yet", s.name, len(s.items))
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
		if _, err := routing.ParseKind(x.Type); err != nil {
			bad("%s: unknown type %q", what, x.Type)
		}
		if _, err := opsJSONTable(x.Arguments); err != nil {
			bad("%s: %v", what, err)
		}
		if x.Name == "" {
			bad("exchange \"\": the default exchange cannot be declared")
		} else if routing.IsReserved(x.Name) {
			// Only as the predeclared exchange is (import skips it).
			same := false
			if vh, ok := b.lookupVHost(x.VHost); ok {
				cur, ok := vh.LookupExchange(x.Name)
				same = ok && cur.Def.Type == x.Type && cur.Def.Durable == x.Durable && cur.Def.AutoDelete == x.AutoDelete && cur.Def.Internal == x.Internal
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
		queues[[2]string{canonicalVHost(q.VHost), q.Name}] = true
		if q.Name == "" || routing.IsReserved(q.Name) {
			bad("%s: the name is empty or reserved (amq.*)", what)
		}
		if _, err := opsJSONTable(q.Arguments); err != nil {
			bad("%s: %v", what, err)
		}
	}
	for _, bd := range d.Bindings {
		what := fmt.Sprintf("binding %q -> %q", bd.Source, bd.Destination)
		if !vhostOK(what, bd.VHost) {
			continue
		}
		vhName := canonicalVHost(bd.VHost)
		lookupExchange := func(name string) bool {
			if vh, ok := b.lookupVHost(vhName); ok {
				_, ok = vh.LookupExchange(name)
				return ok
			}
			// A new vhost: the default and predeclared exchanges.
			return name == "" || slices.ContainsFunc(routing.Predeclared(), func(x routing.Exchange) bool { return x.Name == name })
		}
		lookupQueue := func(name string) bool {
			if vh, ok := b.lookupVHost(vhName); ok {
				_, ok = vh.LookupQueue(name)
				return ok
			}
			return false
		}
		key := func(name string) [2]string { return [2]string{vhName, name} }
		if !lookupExchange(bd.Source) && !exchanges[key(bd.Source)] {
			bad("%s: no exchange %q", what, bd.Source)
		}
		switch bd.DestinationType {
		case "queue":
			if !lookupQueue(bd.Destination) && !queues[key(bd.Destination)] {
				bad("%s: no queue %q", what, bd.Destination)
			}
		case "exchange":
			if !lookupExchange(bd.Destination) && !exchanges[key(bd.Destination)] {
				bad("%s: no exchange %q", what, bd.Destination)
			}
		default:
			bad("%s: destination_type %q is neither \"queue\" nor \"exchange\"", what, bd.DestinationType)
		}
		if _, err := opsJSONTable(bd.Arguments); err != nil {
			bad("%s: %v", what, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return users, nil
}

// tableJSON converts a field table to JSON values the way RabbitMQ's
// management API shows them: numbers as numbers, timestamps as Unix
// seconds, byte arrays as strings when they are UTF-8 (else base64), nested
// tables as objects. It never returns nil, so JSON shows {}.
func opsTableJSON(t amqp.Table) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = opsValueJSON(v)
	}
	return out
}

func opsValueJSON(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return opsTableJSON(v)
	case map[string]any:
		return opsTableJSON(v)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = opsValueJSON(x)
		}
		return out
	case []byte:
		if utf8.Valid(v) {
			return string(v)
		}
		return base64.StdEncoding.EncodeToString(v)
	case time.Time:
		return v.Unix()
	case amqp.Decimal:
		return float64(v.Value) / math.Pow10(int(v.Scale))
	case float32:
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Sprint(v) // JSON has no NaN or infinity
		}
		return v
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprint(v)
		}
		return v
	case nil, string, bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, int:
		return v
	}
	return fmt.Sprint(v)
}

// jsonTable converts JSON arguments to a field table: whole numbers become
// int64 (RabbitMQ's "l"), other numbers float64, objects nested tables.
// nil and {} give a nil table.
func opsJSONTable(m map[string]any) (amqp.Table, error) {
	if len(m) == 0 {
		return nil, nil
	}
	t := make(amqp.Table, len(m))
	for k, v := range m {
		x, err := opsJSONValue(v, 0)
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", k, err)
		}
		t[k] = x
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// opsMaxJSONDepth bounds nesting, as the wire's table decoder does.
const opsMaxJSONDepth = 64

func opsJSONValue(v any, depth int) (any, error) {
	if depth > opsMaxJSONDepth {
		return nil, errors.New("nested too deeply")
	}
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", v)
		}
		return f, nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), nil
		}
		return v, nil
	case map[string]any:
		t := make(amqp.Table, len(v))
		for k, x := range v {
			y, err := opsJSONValue(x, depth+1)
			if err != nil {
				return nil, err
			}
			t[k] = y
		}
		return t, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			y, err := opsJSONValue(x, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	case nil, string, bool:
		return v, nil
	}
	return nil, fmt.Errorf("unsupported JSON value %T", v)
}

// decodeJSONBody decodes a request or file body with UseNumber, so whole
// numbers stay integers.
func opsDecodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
