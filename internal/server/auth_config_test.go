package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/httpbackend"
	"github.com/warrenmq/broker/auth/ldap"
	"github.com/warrenmq/broker/auth/oauth2"
	"github.com/warrenmq/broker/internal/amqptest"
)

// authConf applies conf as a rabbitmq.conf and returns what it built.
func authConf(t testing.TB, conf string) (auth.Chain, error) {
	path := filepath.Join(t.TempDir(), "rabbitmq.conf")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	s := newSettings(io.Discard)
	err := applyConfigFile(s, path)
	return s.auth.chain, err
}

// entryShape is a chain entry as the tests compare it: its name and the
// kinds of its halves ("internal" for the broker's user database).
type entryShape struct{ name, authn, authz string }

func shapeOf(b auth.Backend) entryShape {
	kind := func(v any) string {
		switch v := v.(type) {
		case nil:
			if b.Name == auth.InternalName {
				return "internal"
			}
			return "none"
		case *httpbackend.Backend:
			return "http"
		case *ldap.Backend:
			return "ldap"
		case *oauth2.Backend:
			return "oauth2"
		case *auth.Cache:
			inner := "internal"
			switch v.Authn.(type) {
			case *httpbackend.Backend:
				inner = "http"
			case *ldap.Backend:
				inner = "ldap"
			}
			return fmt.Sprintf("cache(%s,%v)", inner, v.TTL)
		}
		if v == auth.InternalAuthz {
			return "internal"
		}
		return fmt.Sprintf("%T", v)
	}
	var authz any
	if b.Authz != nil {
		authz = b.Authz
	}
	return entryShape{b.Name, kind(b.Authn), kind(authz)}
}

// TestAuthConfig: auth_backends.N (short and long names, .authn/.authz),
// auth_http.* and auth_cache.* build the chain RabbitMQ would run.
func TestAuthConfig(t *testing.T) {
	const ldapConf = "auth_ldap.servers.1 = ldap.example\nauth_ldap.user_dn_pattern = cn=${username},ou=People,dc=example,dc=com\n"
	const oauthConf = "auth_oauth2.resource_server_id = rabbitmq\nauth_oauth2.jwks_url = https://idp.example/jwks\n"
	const paths = "auth_http.user_path = http://auth.example/u\nauth_http.vhost_path = http://auth.example/v\n" +
		"auth_http.resource_path = http://auth.example/r\nauth_http.topic_path = http://auth.example/t\n"
	for _, tc := range []struct {
		name, conf string
		want       []entryShape
	}{
		{"none", "", nil},
		{"internal then http", "auth_backends.1 = internal\nauth_backends.2 = http\n" + paths,
			[]entryShape{{"internal", "internal", "internal"}, {"http", "http", "http"}}},
		{"long names, file order does not matter", "auth_backends.2 = rabbit_auth_backend_internal\nauth_backends.1 = rabbit_auth_backend_http\n",
			[]entryShape{{"http", "http", "http"}, {"internal", "internal", "internal"}}},
		{"authn http, authz internal", "auth_backends.1.authn = http\nauth_backends.1.authz = internal\n",
			[]entryShape{{"http/internal", "http", "internal"}}},
		{"authn internal, authz http", "auth_backends.1.authn = internal\nauth_backends.1.authz = http\n",
			[]entryShape{{"internal", "internal", "http"}}},
		{"authn alone stands for both", "auth_backends.1.authn = http\n", []entryShape{{"http", "http", "http"}}},
		{"cache of http", "auth_backends.1 = cache\nauth_cache.cached_backend = http\nauth_cache.cache_ttl = 60000\n",
			[]entryShape{{"cache", "cache(http,1m0s)", "cache(http,1m0s)"}}},
		{"cache of http authn, internal authz", "auth_backends.1 = cache\nauth_cache.cached_backend.authn = rabbit_auth_backend_http\nauth_cache.cached_backend.authz = internal\n",
			[]entryShape{{"cache", "cache(http,15s)", "internal"}}},
		{"cache of internal is the database itself", "auth_backends.1 = cache\nauth_cache.cache_refusals = false\n",
			[]entryShape{{"internal", "internal", "internal"}}},
		{"ldap", "auth_backends.1 = ldap\n" + ldapConf, []entryShape{{"ldap", "ldap", "ldap"}}},
		{"internal then ldap, long name", "auth_backends.1 = internal\nauth_backends.2 = rabbit_auth_backend_ldap\n" + ldapConf,
			[]entryShape{{"internal", "internal", "internal"}, {"ldap", "ldap", "ldap"}}},
		{"authn internal, authz ldap", "auth_backends.1.authn = internal\nauth_backends.1.authz = ldap\n" + ldapConf,
			[]entryShape{{"internal", "internal", "ldap"}}},
		{"cache of ldap", "auth_backends.1 = cache\nauth_cache.cached_backend = ldap\nauth_cache.cache_ttl = 30000\n" + ldapConf,
			[]entryShape{{"cache", "cache(ldap,30s)", "cache(ldap,30s)"}}},
		{"oauth2 then internal", "auth_backends.1 = oauth2\nauth_backends.2 = internal\n" + oauthConf,
			[]entryShape{{"oauth2", "oauth2", "oauth2"}, {"internal", "internal", "internal"}}},
		{"oauth2 long name, authz internal", "auth_backends.1.authn = rabbit_auth_backend_oauth2\nauth_backends.1.authz = internal\n" + oauthConf,
			[]entryShape{{"oauth2/internal", "oauth2", "internal"}}},
		{"oauth2 and a cached ldap", "auth_backends.1 = oauth2\nauth_backends.2 = cache\nauth_cache.cached_backend = ldap\n" + oauthConf + ldapConf,
			[]entryShape{{"oauth2", "oauth2", "oauth2"}, {"cache", "cache(ldap,15s)", "cache(ldap,15s)"}}},
		{"http options", "auth_backends.1 = http\nauth_http.http_method = post\nauth_http.request_timeout = 3000\nauth_http.connection_timeout = 1000\n" + paths,
			[]entryShape{{"http", "http", "http"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain, err := authConf(t, tc.conf)
			require.NoError(t, err)
			var got []entryShape
			for _, b := range chain {
				got = append(got, shapeOf(b))
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestAuthConfigErrors(t *testing.T) {
	for _, tc := range []struct{ conf, err string }{
		{"auth_backends.1 = kerberos\n", `line 1: auth_backends.1: auth backend "kerberos" is not available`},
		{"auth_backends.1 = ldap\n", "auth_backends.1: auth_ldap: ldap: no servers"},
		{"auth_ldap.port = many\n", `line 1: auth_ldap.port: ldap: auth_ldap.port = "many": want a port number`},
		{"auth_ldap.servers.1 = a\nauth_ldap.referrals = true\n", "line 2: auth_ldap.referrals: ldap: unknown key auth_ldap.referrals"},
		{"auth_ldap.vhost_access_query = {in_group\n", "line 1: auth_ldap.vhost_access_query:"},
		{"auth_cache.cached_backend = oauth2\n", "line 1: auth_cache.cached_backend: oauth2 cannot sit behind the cache"},
		{"auth_cache.cached_backend.authz = rabbit_auth_backend_oauth2\n", "line 1: auth_cache.cached_backend.authz: oauth2 cannot sit behind the cache"},
		{"auth_backends.1 = oauth2\n", "auth_backends.1: auth_oauth2: oauth2: resource_server_id is required"},
		{"auth_backends.1 = oauth2\nauth_oauth2.resource_server_id = r\n", "oauth2: no signing keys"},
		{"auth_backends.1 = oauth2\nauth_oauth2.resource_server_id = r\nauth_oauth2.jwks_url = https://i/j\nauth_oauth2.algorithms.1 = none\n", `algorithm "none" is not supported`},
		{"auth_backends.1 = oauth2\nauth_oauth2.resource_server_id = r\nauth_oauth2.jwks_url = https://i/j\nauth_oauth2.scope_aliases.1.alias = a\n", "scope_aliases.1 needs both .alias and .scope"},
		{"auth_backends.1 = oauth2\nauth_oauth2.resource_server_id = r\nauth_oauth2.jwks_url = https://i/j\nauth_oauth2.https.cacertfile = /nonexistent/ca.pem\n", "https.cacertfile"},
		{"auth_oauth2.scope_aliases.1.name = a\n", "line 1: auth_oauth2.scope_aliases.1.name: scope_aliases.1 takes .alias or .scope"},
		{"auth_oauth2.signing_keys.k1 = /nonexistent/k1.pem\n", `line 1: auth_oauth2.signing_keys.k1: signing key "k1":`},
		{"auth_oauth2.verify_aud = maybe\n", "line 1: auth_oauth2.verify_aud:"},
		{"auth_oauth2.algorithms.first = RS256\n", "line 1: auth_oauth2.algorithms.first: the N in algorithms.N must be a number"},
		{"auth_oauth2.preferred_username_claims.x = email\n", "the N in preferred_username_claims.N must be a number"},
		{"auth_oauth2.https.peer_verification = maybe\n", `"maybe" is neither verify_peer nor verify_none`},
		{"auth_oauth2.frobnicate = 1\n", "line 1: auth_oauth2.frobnicate: unknown key auth_oauth2.frobnicate"},
		{"auth_oauth2.resource_servers.r1.id = r\n", "line 1: auth_oauth2.resource_servers.r1.id: several resource servers are not supported"},
		{"auth_oauth2.oauth_providers.p.issuer = https://i\n", "several OAuth providers are not supported"},
		{"auth_oauth2.resource_server_type = rabbitmq\n", "Rich Authorization Requests are not supported"},
		{"auth_oauth2.discovery_endpoint_params.a = b\n", "discovery endpoint parameters are not supported"},
		{"auth_oauth2.https.crl_check = true\n", "CRL checks are not supported"},
		{"auth_backends.one = internal\n", "must be a positive integer"},
		{"auth_backends.0 = internal\n", "must be a positive integer"},
		{"auth_backends.1 = internal\nauth_backends.1.authn = http\n", "line 2: auth_backends.1.authn: auth backend 1 is already defined"},
		{"auth_backends.1 = internal\nauth_backends.1 = http\n", "line 2: auth_backends.1: set twice"},
		{"auth_backends.1.authx = http\n", "takes .authn or .authz"},
		{"auth_http.http_method = put\n", `line 1: auth_http.http_method: "put" is neither get nor post`},
		{"auth_http.request_timeout = soon\n", "line 1: auth_http.request_timeout:"},
		{"auth_backends.1 = http\nauth_http.user_path = auth.example/u\n", "auth_backends.1: auth_http: httpbackend: user_path"},
		{"auth_cache.cache_refusals = true\n", "never remembers refusals"},
		{"auth_cache.cached_backend = cache\n", "cannot cache itself"},
		{"auth_backends.1 = cache\nauth_cache.cached_backend = http\nauth_cache.cached_backend.authn = http\n", "already defined by auth_cache.cached_backend.authn"},
		{"auth_http.ssl_options.verify = verify_peer\n", "line 1: unknown key auth_http.ssl_options.verify"},
	} {
		_, err := authConf(t, tc.conf)
		require.ErrorContains(t, err, tc.err, tc.conf)
	}
}

// TestAuthConfigServes: a server started from a rabbitmq.conf with
// auth_backends.1 = internal, auth_backends.2 = http logs its default user
// in from the database and "app" through the HTTP service, whose
// resource_path answers decide app's permissions.
func TestAuthConfigServes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		switch {
		case r.URL.Path == "/auth/user" && r.Form.Get("username") == "app" && r.Form.Get("password") == "pw":
			_, _ = w.Write([]byte("allow"))
		case r.URL.Path == "/auth/resource" && r.Form.Get("name") == "amq.fanout":
			_, _ = w.Write([]byte("deny"))
		case r.URL.Path == "/auth/user":
			_, _ = w.Write([]byte("deny"))
		default:
			_, _ = w.Write([]byte("allow"))
		}
	}))
	t.Cleanup(srv.Close)
	conf := filepath.Join(t.TempDir(), "rabbitmq.conf")
	require.NoError(t, os.WriteFile(conf, []byte(strings.ReplaceAll(`listeners.tcp.default = 127.0.0.1:0
default_user = admin
default_pass = s3cret
auth_backends.1 = internal
auth_backends.2 = http
auth_http.http_method = post
auth_http.user_path = URL/auth/user
auth_http.vhost_path = URL/auth/vhost
auth_http.resource_path = URL/auth/resource
auth_http.topic_path = URL/auth/topic
auth_http.request_timeout = 5000
`, "URL", srv.URL)), 0o600))
	addrs := startServer(t, []string{"listening on "}, "-memory", "-config", conf)
	amqptest.RequireWorks(t, amqptest.Dial(t, "amqp://admin:s3cret@"+addrs[0]+"/", amqp091.Config{}))
	conn := amqptest.Dial(t, "amqp://app:pw@"+addrs[0]+"/", amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.ExchangeDeclarePassive("amq.direct", "direct", true, false, false, false, nil))
	_, _, err := ch.Get("nope", true)
	amqptest.RequireCode(t, err, amqp091.NotFound) // read allowed; no such queue
	ch = amqptest.Channel(t, conn)
	errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, ch.Publish("amq.fanout", "k", false, false, amqp091.Publishing{Body: []byte("m")}))
	select {
	case e := <-errs:
		require.NotNil(t, e)
		require.Equal(t, amqp091.AccessRefused, e.Code, e.Reason)
		require.Contains(t, e.Reason, "access to exchange 'amq.fanout' in vhost '/' refused for user 'app'")
	case <-time.After(amqptest.Timeout):
		t.Fatal("the refused publish did not close the channel")
	}
	_, err = amqp091.Dial("amqp://app:wrong@" + addrs[0] + "/")
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
}

// FuzzAuthConfig: any file either fails with an error or builds a chain
// whose every entry has a name and an authorisation half.
func FuzzAuthConfig(f *testing.F) {
	for _, s := range []string{
		"auth_backends.1 = internal\nauth_backends.2 = http\n",
		"auth_backends.1.authn = cache\nauth_backends.1.authz = internal\nauth_cache.cached_backend = http\n",
		"auth_backends.3 = rabbit_auth_backend_http\nauth_http.http_method = post\n",
		"auth_backends.1 = ldap\nauth_backends.2 = cache\nauth_cache.cached_backend = ldap\nauth_ldap.servers.1 = h\n",
		"auth_backends.1 = oauth2\nauth_oauth2.resource_server_id = r\nauth_oauth2.jwks_url = https://i/j\nauth_oauth2.scope_aliases.1.alias = a\nauth_oauth2.scope_aliases.1.scope = r.read:*/*\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, conf string) {
		chain, err := authConf(t, conf)
		if err != nil {
			return
		}
		for _, b := range chain {
			require.NotEmpty(t, b.Name)
			require.NotNil(t, b.Authz)
			if b.Name != auth.InternalName {
				require.NotNil(t, b.Authn)
			}
		}
	})
}
