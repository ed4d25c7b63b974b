package ldap_test

import (
	"fmt"
	"time"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/ldap"
)

// A config file's auth_ldap.* lines applied one by one, then the backend
// behind a cache, as a chain entry after the user database.
func ExampleConfig_Set() {
	var cfg ldap.Config
	for _, kv := range [][2]string{
		{"auth_ldap.servers.1", "ldap.example.com"},
		{"auth_ldap.use_starttls", "true"},
		{"auth_ldap.user_dn_pattern", "cn=${username},ou=People,dc=example,dc=com"},
		{"auth_ldap.other_bind", "anon"},
		{"auth_ldap.timeout", "2000"},
		{"auth_ldap.tag_queries.administrator", `{in_group, "cn=admins,ou=Groups,dc=example,dc=com"}`},
	} {
		if err := cfg.Set(kv[0], kv[1]); err != nil {
			fmt.Println(err)
			return
		}
	}
	lb, err := ldap.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lb.Close()
	cache := &auth.Cache{Authn: lb, Authz: lb, TTL: time.Minute}
	chain := auth.Chain{auth.Internal, cache.Backend(ldap.Name)}
	fmt.Println(cfg.Servers, cfg.Timeout, chain[1].Name)
	fmt.Println(cfg.Set("auth_ldap.port", "ldap"))
	// Output:
	// [ldap.example.com] 2s ldap
	// ldap: auth_ldap.port = "ldap": want a port number
}

// ParseQuery reads a query as RabbitMQ's advanced.config writes it.
func ExampleParseQuery() {
	_, err := ldap.ParseQuery(`{'or', [{in_group, "cn=${vhost}-users,ou=Groups,dc=example,dc=com"},
	                                    {equals, "${username}", "admin"}]}`)
	fmt.Println(err == nil)
	_, err = ldap.ParseQuery(`{in_group, "cn=g", "mem)ber"}`)
	fmt.Println(err)
	// Output:
	// true
	// ldap: query "{in_group, \"cn=g\", \"mem)ber\"}": in_group: bad attribute name "mem)ber"
}
