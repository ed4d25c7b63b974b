package definitions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
)

// recorder is a definitions.Broker with one vhost "/" holding the default
// exchange and amq.direct; it records every write and every part skipped,
// and fails the writes named in fail. rules are its Rules.
type recorder struct {
	writes []string
	fail   map[string]bool
	rules  definitions.Rules
}

func (r *recorder) Rules() definitions.Rules { return r.rules }
func (r *recorder) Skipped(what string)      { r.writes = append(r.writes, "skipped "+what) }

func (r *recorder) VHosts() []string { return []string{"/"} }

func (r *recorder) Contents(vhost string) (definitions.Contents, bool) {
	if vhost != "/" && vhost != "" {
		return definitions.Contents{}, false
	}
	return definitions.Contents{Exchanges: []definitions.Exchange{
		{Name: "", VHost: "/", Type: "direct", Durable: true},
		{Name: "amq.direct", VHost: "/", Type: "direct", Durable: true},
	}}, true
}

func (r *recorder) ListUsers(context.Context) ([]definitions.User, error) { return nil, nil }
func (r *recorder) GetUser(_ context.Context, name string) (definitions.User, error) {
	if name != "guest" {
		return definitions.User{}, errors.New("not found")
	}
	return definitions.User{Name: name}, nil
}
func (r *recorder) ListPermissions(context.Context) ([]definitions.Permission, error) {
	return nil, nil
}

func (r *recorder) GetVHost(_ context.Context, name string) (definitions.VHost, error) {
	return definitions.VHost{Name: name}, nil
}

func (r *recorder) ListTopicPermissions(context.Context) ([]definitions.TopicPermission, error) {
	return nil, nil
}

func (r *recorder) CheckVHost(v definitions.VHost) error {
	if v.DefaultQueueType == "fancy" {
		return errors.New("unknown queue type 'fancy'")
	}
	for name := range v.Limits {
		if name != "max-queues" && name != "max-connections" {
			return errors.New("unknown limit")
		}
	}
	return nil
}

func (r *recorder) CheckTopicPermission(p definitions.TopicPermission) error {
	if p.Write == "(" {
		return errors.New("write permission: missing )")
	}
	return nil
}

func (r *recorder) write(what string) error {
	r.writes = append(r.writes, what)
	if r.fail[what] {
		return errors.New("refused")
	}
	return nil
}

func (r *recorder) PutVHost(_ context.Context, v definitions.VHost) (bool, error) {
	return true, r.write(fmt.Sprintf("vhost %s %q %v %q", v.Name, v.Description, v.Tags, v.DefaultQueueType))
}
func (r *recorder) PutVHostLimit(_ context.Context, vhost, name string, value int64) error {
	return r.write(fmt.Sprintf("limit %s %s=%d", vhost, name, value))
}
func (r *recorder) PutTopicPermission(_ context.Context, p definitions.TopicPermission) (bool, error) {
	return true, r.write("topic permission " + p.User + "@" + p.VHost + "/" + p.Exchange)
}
func (r *recorder) PutUser(_ context.Context, u definitions.User) error {
	return r.write("user " + u.Name)
}
func (r *recorder) PutPermission(_ context.Context, p definitions.Permission) error {
	return r.write("permission " + p.User + "@" + p.VHost)
}
func (r *recorder) DeclareExchange(_ context.Context, x definitions.Exchange, _ amqp.Table) error {
	return r.write("exchange " + x.VHost + "/" + x.Name)
}
func (r *recorder) DeclareQueue(_ context.Context, q definitions.Queue, args amqp.Table) error {
	return r.write(fmt.Sprintf("queue %s/%s %v", q.VHost, q.Name, args))
}
func (r *recorder) Bind(_ context.Context, b definitions.Binding, _ amqp.Table) error {
	return r.write("bind " + b.VHost + "/" + b.Source + "->" + b.Destination)
}

// importFile is a file touching every section, the new vhost "v"
// included.
func importFile(t *testing.T) *definitions.File {
	t.Helper()
	raw := `{
		"vhosts": [{"name": "/"}, {"name": "v", "description": "d", "tags": ["a"],
				"metadata": {"description": "ignored", "tags": ["ignored"], "default_queue_type": "quorum"},
				"limits": {"max-queues": 5, "max-connections": -1}},
			{"name": "w", "limits": []}],
		"topic_permissions": [{"user": "alice", "vhost": "v", "exchange": "amq.topic", "write": "^a", "read": ".*"}],
		"users": [{"name": "alice", "password": "pw", "tags": "management"}],
		"permissions": [{"user": "alice", "vhost": "v", "configure": ".*", "write": ".*", "read": ".*"},
			{"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}],
		"exchanges": [{"name": "x", "vhost": "v", "type": "topic", "durable": true},
			{"name": "amq.direct", "vhost": "/", "type": "direct", "durable": true}],
		"queues": [{"name": "q", "vhost": "v", "durable": true, "arguments": {"x-max-length": 5}},
			{"name": "r", "vhost": "/", "durable": true}],
		"bindings": [{"source": "x", "vhost": "v", "destination": "q", "destination_type": "queue", "routing_key": "#"},
			{"source": "amq.direct", "vhost": "/", "destination": "r", "destination_type": "queue", "routing_key": "r"}]
	}`
	var d definitions.File
	require.NoError(t, json.Unmarshal([]byte(raw), &d))
	return &d
}

// TestImportOrderAndAllOrNothing pins what package definitions promises:
// a file that fails a check writes nothing at all (whatever else in it is
// fine), a good one is applied in order (vhosts, users, permissions,
// exchanges, queues, bindings; predeclared exchanges skipped), and an
// error while applying leaves the rest applied and is returned.
func TestImportOrderAndAllOrNothing(t *testing.T) {
	ctx := context.Background()
	applied := []string{
		`vhost v "d" [a] "quorum"`, "limit v max-connections=-1", "limit v max-queues=5", `vhost w "" [] ""`,
		"user alice", "permission alice@v", "permission guest@/", "topic permission alice@v/amq.topic",
		"exchange v/x", "queue v/q map[x-max-length:5]", "queue //r map[]",
		"bind v/x->q", "bind //amq.direct->r",
	}
	t.Run("good file", func(t *testing.T) {
		r := &recorder{}
		require.NoError(t, definitions.Import(ctx, r, importFile(t)))
		require.Equal(t, applied, r.writes)
	})
	for name, edit := range map[string]func(*definitions.File){
		"bad hash": func(d *definitions.File) {
			d.Users[0].Password, d.Users[0].PasswordHash, d.Users[0].HashingAlgorithm = "", "c2FsdA==", "bad"
		},
		"bad regexp":       func(d *definitions.File) { d.Permissions[1].Read = "(" },
		"unknown vhost":    func(d *definitions.File) { d.Queues[1].VHost = "nope" },
		"dangling binding": func(d *definitions.File) { d.Bindings[1].Destination = "nowhere" },
		"bad policy": func(d *definitions.File) {
			d.Policies = []definitions.Policy{{VHost: "v", Name: "p", Pattern: "(", Definition: map[string]any{"max-length": 1}}}
		},
		"policy vhost": func(d *definitions.File) {
			d.Policies = []definitions.Policy{{VHost: "nope", Name: "p", Pattern: ".", Definition: map[string]any{"max-length": 1}}}
		},
		"shovel parameter": func(d *definitions.File) {
			d.Parameters = []definitions.Parameter{{VHost: "/", Component: "shovel", Name: "s", Value: json.RawMessage(`{}`)}}
		},
		"unknown user":      func(d *definitions.File) { d.Permissions[1].User = "bob" },
		"bad queue type":    func(d *definitions.File) { d.VHosts[1].DefaultQueueType = "fancy" },
		"bad limit":         func(d *definitions.File) { d.VHosts[1].Limits["max-fun"] = 1 },
		"bad topic regexp":  func(d *definitions.File) { d.TopicPermissions[0].Write = "(" },
		"topic of nobody":   func(d *definitions.File) { d.TopicPermissions[0].User = "bob" },
		"topic on no vhost": func(d *definitions.File) { d.TopicPermissions[0].VHost = "nope" },
		"amq.* redeclared":  func(d *definitions.File) { d.Exchanges[1].Type = "fanout" },
		"argument too deep": func(d *definitions.File) { d.Queues[0].Arguments = map[string]any{"x": nested(100)} },
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			d := importFile(t)
			edit(d)
			err := definitions.Import(ctx, r, d)
			require.Error(t, err)
			require.Empty(t, r.writes, "a file that fails a check writes nothing")
		})
	}
	t.Run("apply error", func(t *testing.T) {
		r := &recorder{fail: map[string]bool{"queue v/q map[x-max-length:5]": true}}
		err := definitions.Import(ctx, r, importFile(t))
		require.ErrorContains(t, err, `broker: definitions: queue "q" in vhost "v": refused`)
		require.Equal(t, applied, r.writes, "the writes after the failed one are still made")
	})
}

// TestImportReservedQueues: a queue whose name begins with "amq." is
// skipped, as every RabbitMQ import skips it; a binding to one needs the
// queue up to RabbitMQ 4.4.0 (the file is refused: nothing creates it) and
// is skipped too from 4.4.1.
func TestImportReservedQueues(t *testing.T) {
	ctx := context.Background()
	withReserved := func(t *testing.T, binding bool) *definitions.File {
		d := importFile(t)
		d.Queues = append(d.Queues, definitions.Queue{Name: "amq.gen-1", VHost: "/", Durable: true})
		if binding {
			d.Bindings = append(d.Bindings, definitions.Binding{Source: "amq.direct", VHost: "/",
				Destination: "amq.gen-1", DestinationType: "queue", RoutingKey: "k"})
		}
		return d
	}
	skippedQueue := `skipped queue "amq.gen-1" in vhost "/": its name begins with 'amq.'`
	for _, rules := range []definitions.Rules{{}, {SkipReservedQueueBindings: true}} {
		t.Run(fmt.Sprintf("queue alone, %+v", rules), func(t *testing.T) {
			r := &recorder{rules: rules}
			require.NoError(t, definitions.Import(ctx, r, withReserved(t, false)))
			require.Contains(t, r.writes, skippedQueue)
			require.NotContains(t, r.writes, "queue //amq.gen-1 map[]")
		})
	}
	t.Run("binding, before 4.4.1", func(t *testing.T) {
		r := &recorder{}
		err := definitions.Import(ctx, r, withReserved(t, true))
		require.ErrorContains(t, err, `binding "amq.direct" -> "amq.gen-1": no queue "amq.gen-1"`)
		require.Empty(t, r.writes)
	})
	t.Run("binding, 4.4.1", func(t *testing.T) {
		r := &recorder{rules: definitions.Rules{SkipReservedQueueBindings: true}}
		require.NoError(t, definitions.Import(ctx, r, withReserved(t, true)))
		require.Contains(t, r.writes, skippedQueue)
		require.Contains(t, r.writes, `skipped binding "amq.direct" -> queue "amq.gen-1" in vhost "/": the queue's name begins with 'amq.'`)
		require.Contains(t, r.writes, "bind //amq.direct->r", "the other bindings are applied")
	})
}

// nested is a JSON object nested n deep.
func nested(n int) map[string]any {
	m := map[string]any{}
	for range n {
		m = map[string]any{"n": m}
	}
	return m
}

func (r *recorder) ListPolicies(context.Context, string) ([]definitions.Policy, error) {
	return nil, nil
}
func (r *recorder) ListOperatorPolicies(context.Context, string) ([]definitions.Policy, error) {
	return nil, nil
}
func (r *recorder) CheckParameter(p definitions.Parameter) error {
	return fmt.Errorf("Validation failed\n\ncomponent %s not found\n", p.Component)
}
func (r *recorder) ListParameters(context.Context, string, string) ([]definitions.Parameter, error) {
	return nil, nil
}
func (r *recorder) PutParameter(_ context.Context, p definitions.Parameter) (bool, error) {
	return true, r.write(fmt.Sprintf("parameter %s/%s/%s", p.Component, p.VHost, p.Name))
}
func (r *recorder) ListGlobalParameters(context.Context) ([]definitions.GlobalParameter, error) {
	return nil, nil
}
func (r *recorder) PutGlobalParameter(_ context.Context, g definitions.GlobalParameter) (bool, error) {
	return true, r.write("global parameter " + g.Name)
}
func (r *recorder) PutPolicy(_ context.Context, p definitions.Policy) error {
	return r.write(fmt.Sprintf("policy %s/%s operator=false %v", p.VHost, p.Name, p.Definition))
}
func (r *recorder) PutOperatorPolicy(_ context.Context, p definitions.Policy) error {
	return r.write(fmt.Sprintf("policy %s/%s operator=true %v", p.VHost, p.Name, p.Definition))
}
