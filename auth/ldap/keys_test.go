package ldap_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/auth/ldap"
	"github.com/warrenmq/broker/internal/rabbitconf"
)

// TestConfigSet: RabbitMQ's documented auth_ldap.* settings, read from a
// rabbitmq.conf by internal/rabbitconf, land in Config field by field,
// and New accepts the result.
func TestConfigSet(t *testing.T) {
	entries, err := rabbitconf.Parse(strings.NewReader(`
auth_ldap.servers.1 = ldap1.example.com
auth_ldap.servers.2 = ldap2.example.com:1389
auth_ldap.port = 636
auth_ldap.use_ssl = true
auth_ldap.ssl_options.verify = verify_none
auth_ldap.ssl_options.server_name_indication = ldap.example.com
auth_ldap.user_dn_pattern = ${username}
auth_ldap.user_bind_pattern = ${ad_user}@${ad_domain}.example.com
auth_ldap.dn_lookup_attribute = uid
auth_ldap.dn_lookup_base = ou=People,dc=example,dc=com
auth_ldap.group_lookup_base = ou=Groups,dc=example,dc=com
auth_ldap.dn_lookup_bind.user_dn = cn=svc,dc=example,dc=com
auth_ldap.dn_lookup_bind.password = s3cret
auth_ldap.other_bind = anon
auth_ldap.timeout = 1500
auth_ldap.idle_timeout = infinity
auth_ldap.connection_pool_size = 8
auth_ldap.log = network
auth_ldap.vhost_access_query = {in_group, "cn=${vhost}-users,ou=Groups,dc=example,dc=com"}
auth_ldap.tag_queries.administrator = {in_group, "cn=admins,ou=Groups,dc=example,dc=com"}
`))
	require.NoError(t, err)
	var c ldap.Config
	for _, e := range entries {
		require.NoError(t, c.Set(e.Key, e.Value), "line %d", e.Line)
	}
	require.Equal(t, ldap.Config{
		Servers:           []string{"ldap1.example.com", "ldap2.example.com:1389"},
		Port:              636,
		UseSSL:            true,
		SSL:               ldap.SSLOptions{VerifyNone: true, ServerName: "ldap.example.com"},
		UserDNPattern:     "${username}",
		UserBindPattern:   "${ad_user}@${ad_domain}.example.com",
		DNLookupAttribute: "uid",
		DNLookupBase:      "ou=People,dc=example,dc=com",
		GroupLookupBase:   "ou=Groups,dc=example,dc=com",
		DNLookupBind:      ldap.Bind{DN: "cn=svc,dc=example,dc=com", Password: "s3cret"},
		OtherBind:         ldap.Bind{Anon: true},
		Timeout:           1500 * time.Millisecond,
		IdleTimeout:       -1,
		PoolSize:          8,
		Log:               true,
		VHostAccessQuery:  `{in_group, "cn=${vhost}-users,ou=Groups,dc=example,dc=com"}`,
		TagQueries:        map[string]string{"administrator": `{in_group, "cn=admins,ou=Groups,dc=example,dc=com"}`},
	}, c)
	b, err := ldap.New(c)
	require.NoError(t, err)
	require.NoError(t, b.Close())
}

// TestConfigErrors: unknown keys, unreadable values and inconsistent
// settings are errors naming what is wrong.
func TestConfigErrors(t *testing.T) {
	for _, kv := range [][2]string{
		{"auth_ldap.nonsense", "1"}, {"auth_http.user_path", "x"}, {"auth_ldap.servers.x", "h"},
		{"auth_ldap.port", "70000"}, {"auth_ldap.use_ssl", "yes"}, {"auth_ldap.timeout", "-5"},
		{"auth_ldap.other_bind", "someone"}, {"auth_ldap.vhost_access_query", "{in_group}"},
		{"auth_ldap.tag_queries.", "{constant, true}"}, {"auth_ldap.ssl_options.verify", "maybe"},
		{"auth_ldap.connection_pool_size", "0"}, {"auth_ldap.log", "loud"},
	} {
		var c ldap.Config
		require.Error(t, c.Set(kv[0], kv[1]), "%s = %s", kv[0], kv[1])
	}
	for name, c := range map[string]ldap.Config{
		"no servers":      {},
		"ssl and tls":     {Servers: []string{"h"}, UseSSL: true, UseStartTLS: true},
		"half a lookup":   {Servers: []string{"h"}, DNLookupAttribute: "uid"},
		"bad attribute":   {Servers: []string{"h"}, DNLookupAttribute: "u)(id", DNLookupBase: "dc=x"},
		"bind, no pw":     {Servers: []string{"h"}, OtherBind: ldap.Bind{DN: "cn=svc"}},
		"bad query":       {Servers: []string{"h"}, ResourceAccessQuery: "{constant}"},
		"bad tag query":   {Servers: []string{"h"}, TagQueries: map[string]string{"a": "x"}},
		"missing CA file": {Servers: []string{"h"}, UseSSL: true, SSL: ldap.SSLOptions{CACertFile: "/nonexistent/ca.pem"}},
	} {
		_, err := ldap.New(c)
		require.Error(t, err, name)
	}
}
