package broker

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// rabbitDefinitions is a definitions file in RabbitMQ 3.10's format,
// written by hand (it also imports into RabbitMQ 3.10.8, and its sha512
// user logs in there with the password ops-secret).
const rabbitDefinitions = "testdata/definitions/rabbitmq-3.10.json"

// topology lists a broker's exchanges, queues and bindings as comparable
// strings, via the management API's own shapes.
func topology(t *testing.T, b *Broker) []string {
	t.Helper()
	d, err := b.ExportDefinitions(context.Background())
	require.NoError(t, err)
	var out []string
	for _, x := range d.Exchanges {
		enc, _ := json.Marshal(x)
		out = append(out, "x "+string(enc))
	}
	for _, q := range d.Queues {
		enc, _ := json.Marshal(q)
		out = append(out, "q "+string(enc))
	}
	for _, bd := range d.Bindings {
		enc, _ := json.Marshal(bd)
		out = append(out, "b "+string(enc))
	}
	return out
}

func TestDefinitionsRoundTrip(t *testing.T) {
	opts := Options{VHosts: []string{"/", "other"}}
	src, err := New(opts)
	require.NoError(t, err)
	defer src.Close()
	conn, err := amqp091.DialConfig(src.URL(), amqp091.Config{Dial: src.Dial})
	require.NoError(t, err)
	defer conn.Close()
	ch := mgmtChannel(t, conn)
	require.NoError(t, ch.ExchangeDeclare("events", "topic", true, false, false, false, amqp091.Table{"alternate-exchange": "lost"}))
	require.NoError(t, ch.ExchangeDeclare("lost", "fanout", true, false, true, false, nil))
	require.NoError(t, ch.ExchangeDeclare("hdr", "headers", false, true, false, false, nil))
	_, err = ch.QueueDeclare("q1", true, false, false, false, amqp091.Table{"x-max-length": int32(5), "x-message-ttl": int64(60000)})
	require.NoError(t, err)
	_, err = ch.QueueDeclare("q2", false, true, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("", false, false, true, false, nil) // exclusive, server-named: not exported
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("q1", "a.*", "events", false, nil))
	require.NoError(t, ch.QueueBind("q2", "", "hdr", false, amqp091.Table{"x-match": "all", "k": "v", "n": int32(3)}))
	require.NoError(t, ch.ExchangeBind("hdr", "#", "events", false, nil))
	require.NoError(t, ch.QueueBind("q2", "", "lost", false, nil))

	d, err := src.ExportDefinitions(context.Background())
	require.NoError(t, err)
	require.Equal(t, "Warren", d.ProductName)
	require.Len(t, d.VHosts, 2)
	require.Len(t, d.Permissions, 2, "guest on both vhosts")
	require.Len(t, d.Queues, 2)
	require.Len(t, d.Bindings, 4)
	require.Equal(t, "rabbit_password_hashing_sha256", d.Users[0].HashingAlgorithm)

	var file bytes.Buffer
	require.NoError(t, json.NewEncoder(&file).Encode(d))
	back, err := ReadDefinitions(&file)
	require.NoError(t, err)

	dst, err := New(opts)
	require.NoError(t, err)
	defer dst.Close()
	require.NoError(t, dst.ImportDefinitions(context.Background(), back))
	require.Equal(t, topology(t, src), topology(t, dst))
	// Importing again changes nothing and is no error (identical
	// redeclares).
	require.NoError(t, dst.ImportDefinitions(context.Background(), back))
	require.Equal(t, topology(t, src), topology(t, dst))

	// The imported bindings route.
	conn2, err := amqp091.DialConfig(dst.URL(), amqp091.Config{Dial: dst.Dial})
	require.NoError(t, err)
	defer conn2.Close()
	ch2 := mgmtChannel(t, conn2)
	require.NoError(t, ch2.PublishWithContext(context.Background(), "events", "a.b", false, false, amqp091.Publishing{Body: []byte("x")}))
	require.NoError(t, ch2.PublishWithContext(context.Background(), "events", "zzz", false, false, amqp091.Publishing{
		Headers: amqp091.Table{"k": "v", "n": int32(3)}, Body: []byte("h"),
	}))
	require.NoError(t, dst.WaitIdle(context.Background()))
	s := dst.Stats()
	for _, q := range s.QueueDetails {
		switch q.Name {
		case "q1":
			require.Equal(t, uint64(1), q.Ready)
		case "q2":
			require.Equal(t, uint64(1), q.Ready, "via events -> hdr (e2e, headers match)")
		}
	}
}

func TestDefinitionsImportRabbitMQFile(t *testing.T) {
	b, err := New(Options{
		VHosts: []string{"/", "orders"},
		Users: []User{
			{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
			{Name: "ops", Password: "ops-secret", Tags: []string{"monitoring"}},
		},
	})
	require.NoError(t, err)
	defer b.Close()
	f, err := os.Open(rabbitDefinitions)
	require.NoError(t, err)
	defer f.Close()
	d, err := ReadDefinitions(f)
	require.NoError(t, err)
	require.NoError(t, b.ImportDefinitions(context.Background(), d))

	vh, ok := b.lookupVHost("orders")
	require.True(t, ok)
	x, ok := vh.LookupExchange("orders")
	require.True(t, ok)
	require.Equal(t, "topic", x.Def.Type)
	require.Equal(t, "orders.unrouted", x.Args["alternate-exchange"])
	un, _ := vh.LookupExchange("orders.unrouted")
	require.True(t, un.Def.Internal)
	q, ok := vh.LookupQueue("orders.created")
	require.True(t, ok)
	require.Equal(t, int64(10000), q.Args["x-max-length"])
	require.Len(t, vh.Bindings(), 4)
	root, _ := b.lookupVHost("/")
	_, ok = root.LookupQueue("scratch")
	require.True(t, ok)

	// Routing through what was imported: topic, and e2e to headers. The
	// third message reaches the headers exchange (the e2e binding is "#")
	// and no queue there; as in RabbitMQ, an exchange that routed to
	// another exchange does not use its alternate exchange.
	conn, err := amqp091.DialConfig("amqp://guest:guest@127.0.0.1/orders", amqp091.Config{Dial: b.Dial, Vhost: "orders"})
	require.NoError(t, err)
	defer conn.Close()
	ch := mgmtChannel(t, conn)
	ctx := context.Background()
	require.NoError(t, ch.PublishWithContext(ctx, "orders", "order.created.eu", false, false, amqp091.Publishing{Body: []byte("1")}))
	require.NoError(t, ch.PublishWithContext(ctx, "orders", "order.cancelled", false, false, amqp091.Publishing{Headers: amqp091.Table{"audit": true}, Body: []byte("2")}))
	require.NoError(t, ch.PublishWithContext(ctx, "orders", "order.lost", false, false, amqp091.Publishing{Body: []byte("3")}))
	require.NoError(t, b.WaitIdle(ctx))
	ready := map[string]uint64{}
	for _, q := range b.Stats().QueueDetails {
		ready[q.Name] = q.Ready
	}
	require.Equal(t, map[string]uint64{"orders.created": 1, "orders.audit": 1, "orders.dead": 0, "scratch": 0}, ready)
}

func TestDefinitionsImportRefuses(t *testing.T) {
	load := func(t *testing.T) *Definitions {
		raw, err := os.ReadFile(rabbitDefinitions)
		require.NoError(t, err)
		d, err := ReadDefinitions(bytes.NewReader(raw))
		require.NoError(t, err)
		return d
	}
	good := Options{
		VHosts: []string{"/", "orders"},
		Users: []User{
			{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
			{Name: "ops", Password: "ops-secret", Tags: []string{"monitoring"}},
		},
	}
	for _, tc := range []struct {
		name   string
		opts   func(*Options)
		edit   func(*Definitions)
		errMsg string
	}{
		{"unknown vhost", func(o *Options) { o.VHosts = []string{"/"} }, nil, `vhost "orders" does not exist`},
		{"unknown user", func(o *Options) { o.Users = o.Users[:1] }, nil, `user "ops" is not configured`},
		{"wrong password", func(o *Options) { o.Users[1].Password = "other" }, nil, "does not verify"},
		{"tags differ", func(o *Options) { o.Users[1].Tags = nil }, nil, "tags"},
		{"bad hash", nil, func(d *Definitions) { d.Users[0].PasswordHash = "!!" }, "not base64"},
		{"unknown algorithm", nil, func(d *Definitions) { d.Users[0].HashingAlgorithm = "rabbit_password_hashing_rot13" }, "unknown hashing_algorithm"},
		{"narrow permission", nil, func(d *Definitions) { d.Permissions[0].Write = "^amq\\.gen" }, "narrower"},
		{"policies", nil, func(d *Definitions) { d.Policies = []json.RawMessage{json.RawMessage(`{}`)} }, "policies"},
		{"exchange type", nil, func(d *Definitions) { d.Exchanges[0].Type = "x-delayed-message" }, "unknown type"},
		{"reserved queue", nil, func(d *Definitions) { d.Queues[0].Name = "amq.gen-1" }, "reserved"},
		{"dangling binding", nil, func(d *Definitions) { d.Bindings[0].Destination = "nowhere" }, `no queue "nowhere"`},
		{"destination type", nil, func(d *Definitions) { d.Bindings[0].DestinationType = "topic" }, "destination_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good.clone()
			if tc.opts != nil {
				tc.opts(&o)
			}
			b, err := New(o)
			require.NoError(t, err)
			defer b.Close()
			d := load(t)
			if tc.edit != nil {
				tc.edit(d)
			}
			err = b.ImportDefinitions(context.Background(), d)
			require.ErrorContains(t, err, tc.errMsg)
			require.True(t, strings.HasPrefix(err.Error(), "broker: definitions: "), err.Error())
			// Nothing was applied.
			require.Empty(t, topology(t, b))
		})
	}
	// A conflicting redeclare is reported, the rest still applied.
	b, err := New(good)
	require.NoError(t, err)
	defer b.Close()
	vh, _ := b.lookupVHost("orders")
	_, err = vh.DeclareQueue(context.Background(), "", &amqp.QueueDeclare{Queue: "orders.dead", Durable: false})
	require.NoError(t, err)
	err = b.ImportDefinitions(context.Background(), load(t))
	require.ErrorContains(t, err, "inequivalent arg 'durable'")
	_, ok := vh.LookupQueue("orders.created")
	require.True(t, ok)
}

func TestVerifyUserHashes(t *testing.T) {
	salt := []byte{1, 2, 3, 4}
	for _, tc := range []struct {
		alg  string
		hash string
	}{
		{"rabbit_password_hashing_sha256", opsSaltedHash(sha256.New(), salt, "pw")},
		{"", opsSaltedHash(sha256.New(), salt, "pw")},
		{"rabbit_password_hashing_sha512", opsSaltedHash(sha512.New(), salt, "pw")},
		{"rabbit_password_hashing_md5", opsSaltedHash(md5.New(), salt, "pw")},
	} {
		t.Run(tc.alg, func(t *testing.T) {
			u := DefinitionUser{Name: "u", PasswordHash: tc.hash, HashingAlgorithm: tc.alg}
			require.NoError(t, opsVerifyUser(u, "pw"))
			require.Error(t, opsVerifyUser(u, "pw2"))
		})
	}
	require.NoError(t, opsVerifyUser(DefinitionUser{Password: "pw"}, "pw"))
	require.Error(t, opsVerifyUser(DefinitionUser{Password: "no"}, "pw"))
	require.Error(t, opsVerifyUser(DefinitionUser{}, "pw"))
	h, err := opsHashPassword("guest")
	require.NoError(t, err)
	require.NoError(t, opsVerifyUser(DefinitionUser{PasswordHash: h, HashingAlgorithm: opsHashSHA256}, "guest"))
	// RabbitMQ's documented example: salt 908D C60A, password test12.
	require.Equal(t, "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR", opsSaltedHash(sha256.New(), []byte{0x90, 0x8d, 0xc6, 0x0a}, "test12"))
}

func TestUserTagsForms(t *testing.T) {
	for in, want := range map[string]UserTags{
		`["administrator","monitoring"]`: {"administrator", "monitoring"},
		`"administrator,monitoring"`:     {"administrator", "monitoring"},
		`"administrator, management"`:    {"administrator", "management"},
		`""`:                             nil,
		`[]`:                             {},
	} {
		var tags UserTags
		require.NoError(t, json.Unmarshal([]byte(in), &tags), in)
		require.Equal(t, want, tags, in)
	}
	var tags UserTags
	require.Error(t, json.Unmarshal([]byte(`3`), &tags))
	enc, err := json.Marshal(UserTags(nil))
	require.NoError(t, err)
	require.Equal(t, "[]", string(enc))
}

func TestReadDefinitionsErrors(t *testing.T) {
	for _, in := range []string{"", "{", "[]", `{"users": 3}`, `{} {}`} {
		_, err := ReadDefinitions(strings.NewReader(in))
		require.Error(t, err, in)
		require.Contains(t, err.Error(), "broker: definitions:")
	}
}

func TestDefinitionsHTTP(t *testing.T) {
	b := mgmtBroker(t)
	mgmtShapeSetup(t, b)
	h := mgmtServer(t, b)
	status, _, body := h.do("GET", "/api/definitions", "guest", nil)
	require.Equal(t, http.StatusOK, status)

	b2 := mgmtBroker(t)
	h2 := mgmtServer(t, b2)
	status, _, out := h2.do("POST", "/api/definitions", "guest", string(body))
	require.Equal(t, http.StatusNoContent, status, "%s", out)
	require.Equal(t, topology(t, b), topology(t, b2))

	status, _, out = h2.do("POST", "/api/definitions", "guest", `{"vhosts":[{"name":"nope"}]}`)
	require.Equal(t, http.StatusBadRequest, status)
	_, reason := errorBody(t, out)
	require.Contains(t, reason, `vhost "nope" does not exist`)
}
