package mgmt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/vhost"
)

// fuzzMethods and fuzzUsers are what a fuzz input's first two bytes pick
// from; "nobody" does not exist. The first byte's multiples of
// len(fuzzMethods) pick the Content-Type from fuzzTypes (the seeds below
// it send JSON).
var (
	fuzzMethods = []string{"GET", "PUT", "POST", "DELETE", "HEAD", "PATCH"}
	fuzzUsers   = []string{"guest", "mon", "mgr", "nobody", ""}
	fuzzTypes   = []string{"application/json", "multipart/form-data; boundary=fuzz", "text/plain", "", "application/json; charset=utf-8"}
)

// fuzzUpload is a multipart body of the boundary fuzzTypes names.
const fuzzUpload = "--fuzz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"d.json\"\r\n\r\n" +
	`{"vhosts":[{"name":"uploaded"}],"queues":[{"name":"mq","vhost":"uploaded","durable":true}]}` + "\r\n--fuzz--\r\n"

// fuzzBroker is the management fuzzer's broker: vhosts "/" and "secret"
// with the users of mgmtAuthzBroker's rules (mon and mgr have no
// permissions on secret), a queue q holding a message and an exchange x
// bound to it in both vhosts.
func fuzzBroker(tb testing.TB) (*broker.Broker, http.Handler) {
	tb.Helper()
	ctx := context.Background()
	b, err := broker.New(broker.Options{VHosts: []string{"/", "secret"}, Limits: broker.LimitOptions{MaxQueuesPerVHost: 64}, Users: []broker.User{
		{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
		{Name: "mon", Password: "mon", Tags: []string{"monitoring"}},
		{Name: "mgr", Password: "mgr", Tags: []string{"management"}},
	}})
	require.NoError(tb, err)
	for _, u := range []string{"mon", "mgr"} {
		require.NoError(tb, b.Admin().DeletePermission(ctx, u, "secret"))
	}
	for _, v := range []string{"/", "secret"} {
		conn, err := amqp091.DialConfig("amqp://guest:guest@127.0.0.1:5672/"+url.PathEscape(v), amqp091.Config{Dial: b.Dial})
		require.NoError(tb, err)
		ch, err := conn.Channel()
		require.NoError(tb, err)
		_, err = ch.QueueDeclare("q", true, false, false, false, nil)
		require.NoError(tb, err)
		require.NoError(tb, ch.ExchangeDeclare("x", "topic", true, false, false, false, nil))
		require.NoError(tb, ch.QueueBind("q", "k.#", "x", false, nil))
		require.NoError(tb, ch.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m")}))
		require.NoError(tb, conn.Close())
	}
	return b, b.ManagementHandler()
}

// FuzzManagementAPI drives the management handler with a fuzzed method,
// user, path and body and checks what must hold whatever the input: no
// panic, no 500, a known status, JSON where JSON is announced; no write
// and no view of vhost secret by the users without permissions there; and
// no queue or exchange name an AMQP client could not address. A broker
// serves 256 inputs, then a fresh one takes over, so what inputs create
// stays bounded.
func FuzzManagementAPI(f *testing.F) {
	for _, s := range []struct {
		method, user byte
		path, body   string
	}{
		{0, 0, "overview", ""},
		{0, 2, "queues", ""},
		{0, 2, "queues/secret/q", ""},
		{1, 0, "queues/%2F/new", `{"durable":true,"arguments":{"x-max-length":10}}`},
		{1, 1, "queues/secret/new", `{}`},
		{1, 0, "exchanges/%2F/ex", `{"type":"fanout","arguments":{"alternate-exchange":"x"}}`},
		{2, 0, "queues/%2F/q/get", `{"count":5,"ackmode":"reject_requeue_true","encoding":"auto","truncate":1}`},
		{2, 1, "queues/secret/q/get", `{"count":1,"ackmode":"ack_requeue_false","encoding":"base64"}`},
		{2, 0, "bindings/%2F/e/x/q/q", `{"routing_key":"a.b","arguments":{"x-match":"all"}}`},
		{3, 0, "bindings/%2F/e/x/q/q/k.%23", ""},
		{3, 1, "queues/secret/q/contents", ""},
		{3, 2, "exchanges/secret/x", ""},
		{2, 0, "definitions", `{"queues":[{"name":"d","vhost":"/","durable":true,"arguments":{}}]}`},
		{1, 0, "queues/%2F/" + strings.Repeat("n", 256), `{}`},
		{1, 0, "queues/%2F/bad%FF", `{}`},
		{0, 0, "connections", ""},
		{3, 1, "connections/x", ""},
		{1, 0, "vhosts/v%FF", `{"description":"d","tags":"a,b","default_queue_type":"quorum"}`},
		{3, 0, "vhosts/secret", ""},
		{1, 0, "users/u", `{"password_hash":"AQIDBA==","hashing_algorithm":"rabbit_password_hashing_sha512","tags":["management"]}`},
		{1, 2, "users/u", `{"password":"p","tags":"administrator"}`},
		{1, 0, "permissions/secret/mgr", `{"configure":"(","write":".*","read":".*"}`},
		{3, 0, "permissions/%2F/mon", ""},
		{0, 0, "users/mgr/permissions", ""},
		{0, 1, "vhosts/secret/permissions", ""},
		{0, 2, "health/checks/alarms", ""},
		{2, 0, "queues/quorum/%2F/q/replicas/add", `{"node":"warren@2","membership":"voter"}`},
		{3, 1, "queues/quorum/%2F/q/replicas/delete", `{"node":"warren@2"}`},
		{2, 0, "queues/quorum/replicas/on/warren@1/grow", `{"vhost_pattern":"(","queue_pattern":".*","strategy":"even"}`},
		{3, 0, "queues/quorum/replicas/on/warren@1/shrink", ""},
		{0, 0, "health/checks/port-listener/5672", ""},
		{0, 0, "health/checks/protocol-listener/amqps", ""},
		{0, 2, "aliveness-test/secret", ""},
		{0, 0, "aliveness-test/%2F", ""},
		{1, 0, "vhosts/v", `{"description":"d","tags":["a"],"default_queue_type":"stream"}`},
		{0, 2, "vhost-limits", ""},
		{0, 2, "vhost-limits/secret", ""},
		{1, 0, "vhost-limits/%2F/max-connections", `{"value":0}`},
		{1, 0, "vhost-limits/secret/max-queues", `{"value":1}`},
		{1, 1, "vhost-limits/secret/max-queues", `{"value":-1}`},
		{1, 0, "vhost-limits/%2F/max-fun", `{"value":"x"}`},
		{3, 0, "vhost-limits/%2F/max-connections", ""},
		{1, 0, "topic-permissions/secret/mgr", `{"exchange":"x","write":"^{username}","read":"("}`},
		{1, 0, "topic-permissions/%2F/mon", `{"exchange":"x","write":".*","read":""}`},
		{0, 0, "topic-permissions", ""},
		{0, 0, "topic-permissions/%2F/mon", ""},
		{3, 0, "topic-permissions/%2F/mon", ""},
		{0, 0, "users/mon/topic-permissions", ""},
		{0, 0, "vhosts/secret/topic-permissions", ""},
		{2, 0, "exchanges/%2F/amq.default/publish", `{"routing_key":"q","payload":"aGk=","payload_encoding":"base64","properties":{"delivery_mode":2,"timestamp":1,"headers":{"l":[1,{"t":true}]}}}`},
		{2, 1, "exchanges/secret/x/publish", `{"routing_key":"k","payload":"x","payload_encoding":"string","properties":{"expiration":"-1"}}`},
		{0, 2, "queues?page=1&page_size=2&name=(&use_regex=true", ""},
		{0, 0, "queues/%2F?page=1&sort=message_stats.publish&sort_reverse=true", ""},
		{0, 1, "queues/secret?page=2&page_size=1&name=Q", ""},
		{0, 0, "exchanges?page=1&sort=type&name=amq", ""},
		{0, 2, "connections?page=0&page_size=501", ""},
		{0, 0, "channels?page_size=x", ""},
		{0, 0, "queues/%2F/q/unacked", ""},
		{0, 2, "queues/secret/q/unacked", ""},
		{2 + 6, 0, "definitions", fuzzUpload},
		{2 + 6, 0, "definitions", "--fuzz\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--fuzz--\r\n"},
		{1 + 6, 0, "vhosts/mp", fuzzUpload},
		{2 + 12, 0, "definitions", `{"vhosts":[{"name":"plain"}]}`},
		{1 + 18, 0, "vhosts/none", `{}`},
		{1 + 24, 0, "vhosts/charset", `{}`},
	} {
		f.Add(s.method, s.user, s.path, []byte(s.body))
	}
	var b *broker.Broker
	var h http.Handler
	served := 0
	f.Cleanup(func() {
		if b != nil {
			_ = b.Close()
		}
	})
	f.Fuzz(func(t *testing.T, method, user byte, path string, body []byte) {
		if b == nil || served == 256 {
			if b != nil {
				require.NoError(t, b.Close())
			}
			b, h = fuzzBroker(t)
			served = 0
		}
		served++
		u, err := url.Parse("/api/" + path)
		if err != nil || len(body) > 1<<16 {
			return
		}
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		who := fuzzUsers[int(user)%len(fuzzUsers)]
		req := httptest.NewRequest("GET", "/", bytes.NewReader(body))
		req.Method, req.URL, req.RequestURI = m, u, ""
		if who != "" {
			req.SetBasicAuth(who, who)
		}
		if ct := fuzzTypes[int(method)/len(fuzzMethods)%len(fuzzTypes)]; ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		status := rec.Code
		known := []int{200, 201, 204, 400, 401, 404, 405, 413, 415}
		if strings.HasPrefix(u.Path, "/api/health/checks/") || strings.HasPrefix(u.Path, "/api/aliveness-test/") {
			known = append(known, 503) // a failed check
		}
		require.Contains(t, known, status, "%s %s as %q: %s", m, path, who, rec.Body.Bytes())
		if ct := rec.Header().Get("Content-Type"); ct == "application/json" && rec.Body.Len() > 0 {
			require.True(t, json.Valid(rec.Body.Bytes()), "%s %s: %s", m, path, rec.Body.Bytes())
		}
		// Which vhost the path named, as the handler decodes it.
		segs := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
		named := ""
		if len(segs) > 2 {
			named, _ = url.PathUnescape(segs[2])
		}
		if named == "secret" && status < 300 && segs[1] != "definitions" {
			require.NotEqual(t, "mgr", who, "management user without permissions reached secret: %s %s", m, path)
			if m != "GET" && m != "HEAD" {
				require.NotEqual(t, "mon", who, "monitoring user without permissions wrote to secret: %s %s", m, path)
			}
		}
		for _, q := range b.Stats(context.Background()).QueueDetails {
			requireAddressable(t, "queue", q.Name)
		}
		// Every exchange the API could have declared is in an export:
		// the default and amq.* ones, left out, cannot be declared.
		defs, err := b.Admin().Export(context.Background())
		require.NoError(t, err)
		for _, x := range defs.Exchanges {
			requireAddressable(t, "exchange", x.Name)
		}
		for _, v := range defs.VHosts {
			requireAddressable(t, "vhost", v.Name)
		}
		for _, u := range defs.Users {
			requireAddressable(t, "user", u.Name)
		}
	})
}

// requireAddressable fails unless name is one AMQP could carry.
func requireAddressable(t *testing.T, kind, name string) {
	t.Helper()
	require.LessOrEqual(t, len(name), vhost.MaxNameLen, "%s name of %d bytes", kind, len(name))
	require.True(t, utf8.ValidString(name), "%s name %q is not UTF-8", kind, name)
}
