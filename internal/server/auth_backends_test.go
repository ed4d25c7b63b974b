package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/auth/oauth2/oauth2test"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/slapdtest"
	"github.com/warrenmq/broker/internal/testcert"
)

// TestAuthConfigOAuth2Keys: every auth_oauth2 key Warren maps lands in
// oauth2.Config, numbered keys in the order of their N whatever the file
// order, and the backend it builds accepts the configuration.
func TestAuthConfigOAuth2Keys(t *testing.T) {
	dir := t.TempDir()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	keyFile := filepath.Join(dir, "signing-key.pem")
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, testcert.NewCA(t, "idp CA").PEM, 0o600))
	conf := strings.NewReplacer("KEY", keyFile, "CA", caFile).Replace(`auth_backends.1 = oauth2
auth_oauth2.resource_server_id = rabbitmq
auth_oauth2.scope_prefix = api://rabbitmq/
auth_oauth2.verify_aud = false
auth_oauth2.additional_scopes_key = realm_access.roles extra
auth_oauth2.preferred_username_claims.2 = email
auth_oauth2.preferred_username_claims.1 = user_name
auth_oauth2.jwks_uri = https://idp.example/jwks
auth_oauth2.issuer = https://idp.example
auth_oauth2.discovery_endpoint_path = /oidc/config
auth_oauth2.default_key = k1
auth_oauth2.signing_keys.k1 = KEY
auth_oauth2.algorithms.2 = ES256
auth_oauth2.algorithms.1 = RS256
auth_oauth2.scope_aliases.admin = api://rabbitmq/tag:administrator api://rabbitmq/configure:*/*
auth_oauth2.scope_aliases.1.alias = reader
auth_oauth2.scope_aliases.1.scope = api://rabbitmq/read:*/*
auth_oauth2.https.cacertfile = CA
auth_oauth2.https.peer_verification = verify_peer
`)
	path := filepath.Join(dir, "rabbitmq.conf")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	s := newSettings(io.Discard)
	require.NoError(t, applyConfigFile(s, path))
	t.Cleanup(s.auth.close)
	cfg, err := s.auth.oauth.config()
	require.NoError(t, err)
	require.Equal(t, "rabbitmq", cfg.ResourceServerID)
	require.Equal(t, "api://rabbitmq/", cfg.ScopePrefix)
	require.False(t, cfg.EmptyScopePrefix)
	require.True(t, cfg.SkipAudienceCheck)
	require.Equal(t, "realm_access.roles extra", cfg.AdditionalScopesKey)
	require.Equal(t, []string{"user_name", "email"}, cfg.PreferredUsernameClaims)
	require.Equal(t, "https://idp.example/jwks", cfg.JWKSURL)
	require.Equal(t, "https://idp.example", cfg.Issuer)
	require.Equal(t, "/oidc/config", cfg.DiscoveryPath)
	require.Equal(t, "k1", cfg.DefaultKey)
	require.Equal(t, map[string][]byte{"k1": keyPEM}, cfg.SigningKeys)
	require.Equal(t, []string{"RS256", "ES256"}, cfg.Algorithms)
	require.Equal(t, map[string][]string{
		"admin":  {"api://rabbitmq/tag:administrator", "api://rabbitmq/configure:*/*"},
		"reader": {"api://rabbitmq/read:*/*"},
	}, cfg.ScopeAliases)
	require.NotNil(t, cfg.TLS)
	require.NotNil(t, cfg.TLS.RootCAs)
	require.False(t, cfg.TLS.InsecureSkipVerify)
	require.Len(t, s.auth.chain, 1)

	// scope_prefix = '' is RabbitMQ's empty prefix; verify_none skips
	// the identity provider's certificate check.
	path2 := filepath.Join(dir, "empty.conf")
	require.NoError(t, os.WriteFile(path2, []byte("auth_oauth2.resource_server_id = r\nauth_oauth2.scope_prefix = ''\nauth_oauth2.https.verify = verify_none\n"), 0o600))
	s = newSettings(io.Discard)
	require.NoError(t, applyConfigFile(s, path2))
	cfg, err = s.auth.oauth.config()
	require.NoError(t, err)
	require.True(t, cfg.EmptyScopePrefix)
	require.True(t, cfg.TLS.InsecureSkipVerify)
}

// requireChannelRefused publishes to exchange on a new channel of conn and
// requires the channel closed with 403 ACCESS_REFUSED naming it.
func requireChannelRefused(t *testing.T, conn *amqp091.Connection, exchange, user string) {
	t.Helper()
	ch := amqptest.Channel(t, conn)
	errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, ch.Publish(exchange, "k", false, false, amqp091.Publishing{Body: []byte("m")}))
	select {
	case e := <-errs:
		require.NotNil(t, e)
		require.Equal(t, amqp091.AccessRefused, e.Code, e.Reason)
		require.Contains(t, e.Reason, "access to exchange '"+exchange+"' in vhost '/' refused for user '"+user+"'")
	case <-time.After(amqptest.Timeout):
		t.Fatal("the refused publish did not close the channel")
	}
}

// TestAuthConfigServesOAuth2: a server started from a rabbitmq.conf with
// auth_backends.1 = oauth2 (jwks_url at oauth2test's identity provider)
// then internal logs a client in with a token as the password over
// amqp091-go; the token's scopes decide its permissions, a token for
// another audience is refused, and the default user still logs in from
// the database.
func TestAuthConfigServesOAuth2(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	conf := filepath.Join(t.TempDir(), "rabbitmq.conf")
	require.NoError(t, os.WriteFile(conf, []byte(`listeners.tcp.default = 127.0.0.1:0
default_user = admin
default_pass = s3cret
auth_backends.1 = rabbit_auth_backend_oauth2
auth_backends.2 = internal
auth_oauth2.resource_server_id = rabbitmq
auth_oauth2.jwks_url = `+is.URL()+`
auth_oauth2.preferred_username_claims.1 = user_name
`), 0o600))
	addrs := startServer(t, []string{"listening on "}, "-memory", "-config", conf)
	claims := oauth2test.Claims("rabbitmq", "svc-sub", "rabbitmq.read:*/* rabbitmq.write:%2F/amq.direct", time.Hour)
	claims["user_name"] = "svc"
	tok := is.Sign(claims, "", false)
	conn := amqptest.Dial(t, amqptest.UserURL("amqp://"+addrs[0]+"/", "ignored", tok), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.Publish("amq.direct", "k", false, false, amqp091.Publishing{Body: []byte("m")}))
	_, _, err := ch.Get("nope", true)
	amqptest.RequireCode(t, err, amqp091.NotFound) // read allowed; no such queue
	requireChannelRefused(t, conn, "amq.fanout", "svc")

	wrongAud := is.Sign(oauth2test.Claims("elsewhere", "svc", "rabbitmq.read:*/*", time.Hour), "", false)
	_, err = amqp091.Dial(amqptest.UserURL("amqp://"+addrs[0]+"/", "svc", wrongAud))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
	amqptest.RequireWorks(t, amqptest.Dial(t, "amqp://admin:s3cret@"+addrs[0]+"/", amqp091.Config{}))
}

// TestAuthConfigServesLDAP: a server started from a rabbitmq.conf with
// auth_backends.1 = ldap and auth_ldap.* keys logs a directory user in
// against a real slapd (internal/slapdtest; skipped when slapd is not
// installed), whose resource_access_query decides: writes allowed,
// configure refused. A wrong password is refused.
func TestAuthConfigServesLDAP(t *testing.T) {
	sd := slapdtest.Start(t, `dn: ou=People,`+slapdtest.Suffix+`
objectClass: organizationalUnit
ou: People

dn: cn=carol,ou=People,`+slapdtest.Suffix+`
objectClass: inetOrgPerson
cn: carol
sn: C
userPassword: carolpw
`)
	conf := filepath.Join(t.TempDir(), "rabbitmq.conf")
	require.NoError(t, os.WriteFile(conf, []byte(`listeners.tcp.default = 127.0.0.1:0
auth_backends.1 = ldap
auth_ldap.servers.1 = `+sd.Host+`
auth_ldap.port = `+strconv.Itoa(sd.Port)+`
auth_ldap.user_dn_pattern = cn=${username},ou=People,`+slapdtest.Suffix+`
auth_ldap.timeout = 5000
auth_ldap.resource_access_query = {for, [{permission, configure, {constant, false}}, {permission, write, {match, {string, "${name}"}, {string, "^amq\\.direct$"}}}, {permission, read, {constant, true}}]}
`), 0o600))
	addrs := startServer(t, []string{"listening on "}, "-memory", "-config", conf)
	conn := amqptest.Dial(t, amqptest.UserURL("amqp://"+addrs[0]+"/", "carol", "carolpw"), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.Publish("amq.direct", "k", false, false, amqp091.Publishing{Body: []byte("m")}))
	_, err := ch.QueueDeclare("carol-q", false, true, false, false, nil)
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
	requireChannelRefused(t, conn, "amq.fanout", "carol")
	_, err = amqp091.Dial(amqptest.UserURL("amqp://"+addrs[0]+"/", "carol", "wrong"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
}
