package ldap

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// KeyPrefix is the prefix of the rabbitmq.conf keys Config.Set takes.
const KeyPrefix = "auth_ldap."

// Set applies one rabbitmq.conf setting, key with its auth_ldap. prefix
// and value as the file has it, so that a config file maps onto Config
// line by line. It takes RabbitMQ 4.x's auth_ldap.* keys:
//
//	servers.N (in file order), port, use_ssl, use_starttls,
//	ssl_options.cacertfile, .certfile, .keyfile, .verify (verify_peer or
//	verify_none), .server_name_indication, user_dn_pattern,
//	user_bind_pattern,
//	dn_lookup_attribute, dn_lookup_base, group_lookup_base,
//	dn_lookup_bind (as_user or anon), dn_lookup_bind.user_dn,
//	dn_lookup_bind.password, other_bind,
//	other_bind.user_dn, other_bind.password, timeout and idle_timeout
//	(milliseconds or infinity), connection_pool_size, log
//
// and, since RabbitMQ can set the queries only in advanced.config, these
// with the query written as there: vhost_access_query,
// resource_access_query, topic_access_query, tag_queries.<tag>. A key it
// does not know, or a value it cannot read, is an error naming it; New
// checks the whole.
func (c *Config) Set(key, value string) error {
	k, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return fmt.Errorf("ldap: %s is not an %s key", key, KeyPrefix)
	}
	bad := func(want string) error { return fmt.Errorf("ldap: %s = %q: want %s", key, value, want) }
	setBool := func(p *bool) error {
		switch value {
		case "true":
			*p = true
		case "false":
			*p = false
		default:
			return bad("true or false")
		}
		return nil
	}
	setMillis := func(p *time.Duration, infinity time.Duration) error {
		if value == "infinity" {
			*p = infinity
			return nil
		}
		n, err := strconv.ParseUint(value, 10, 32)
		if err != nil || n == 0 {
			return bad("a positive number of milliseconds or infinity")
		}
		*p = time.Duration(n) * time.Millisecond
		return nil
	}
	setBind := func(b *Bind, sub string) error {
		switch sub {
		case "":
			switch value {
			case "as_user":
				*b = Bind{}
			case "anon":
				*b = Bind{Anon: true}
			default:
				return bad("as_user or anon (or .user_dn and .password)")
			}
		case ".user_dn":
			b.Anon, b.DN = false, value
		case ".password":
			b.Anon, b.Password = false, value
		default:
			return fmt.Errorf("ldap: unknown key %s", key)
		}
		return nil
	}
	switch {
	case strings.HasPrefix(k, "servers."):
		if _, err := strconv.ParseUint(strings.TrimPrefix(k, "servers."), 10, 16); err != nil {
			return fmt.Errorf("ldap: unknown key %s (servers.N, N a number)", key)
		}
		c.Servers = append(c.Servers, value)
	case k == "port":
		n, err := strconv.ParseUint(value, 10, 16)
		if err != nil || n == 0 {
			return bad("a port number")
		}
		c.Port = int(n)
	case k == "use_ssl":
		return setBool(&c.UseSSL)
	case k == "use_starttls":
		return setBool(&c.UseStartTLS)
	case k == "ssl_options.cacertfile":
		c.SSL.CACertFile = value
	case k == "ssl_options.certfile":
		c.SSL.CertFile = value
	case k == "ssl_options.keyfile":
		c.SSL.KeyFile = value
	case k == "ssl_options.server_name_indication":
		c.SSL.ServerName = value
	case k == "ssl_options.verify":
		switch value {
		case "verify_peer":
			c.SSL.VerifyNone = false
		case "verify_none":
			c.SSL.VerifyNone = true
		default:
			return bad("verify_peer or verify_none")
		}
	case k == "user_dn_pattern":
		c.UserDNPattern = value
	case k == "user_bind_pattern":
		c.UserBindPattern = value
	case k == "dn_lookup_attribute":
		c.DNLookupAttribute = noneIsEmpty(value)
	case k == "dn_lookup_base":
		c.DNLookupBase = noneIsEmpty(value)
	case k == "group_lookup_base":
		c.GroupLookupBase = noneIsEmpty(value)
	case k == "dn_lookup_bind" || strings.HasPrefix(k, "dn_lookup_bind."):
		return setBind(&c.DNLookupBind, strings.TrimPrefix(k, "dn_lookup_bind"))
	case k == "other_bind" || strings.HasPrefix(k, "other_bind."):
		return setBind(&c.OtherBind, strings.TrimPrefix(k, "other_bind"))
	case k == "timeout":
		return setMillis(&c.Timeout, 0)
	case k == "idle_timeout":
		return setMillis(&c.IdleTimeout, -1)
	case k == "connection_pool_size":
		n, err := strconv.ParseUint(value, 10, 16)
		if err != nil || n == 0 {
			return bad("a positive number")
		}
		c.PoolSize = int(n)
	case k == "log":
		switch value {
		case "false":
			c.Log = false
		case "true", "network", "network_unsafe":
			c.Log = true // Warren logs decisions, never the traffic
		default:
			return bad("true, false, network or network_unsafe")
		}
	case k == "vhost_access_query", k == "resource_access_query", k == "topic_access_query":
		if _, err := ParseQuery(value); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		switch k {
		case "vhost_access_query":
			c.VHostAccessQuery = value
		case "resource_access_query":
			c.ResourceAccessQuery = value
		default:
			c.TopicAccessQuery = value
		}
	case strings.HasPrefix(k, "tag_queries."):
		tag := strings.TrimPrefix(k, "tag_queries.")
		if tag == "" {
			return fmt.Errorf("ldap: %s names no tag", key)
		}
		if _, err := ParseQuery(value); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if c.TagQueries == nil {
			c.TagQueries = map[string]string{}
		}
		c.TagQueries[tag] = value
	default:
		return fmt.Errorf("ldap: unknown key %s", key)
	}
	return nil
}

// noneIsEmpty reads RabbitMQ's none (unset) as the empty string.
func noneIsEmpty(v string) string {
	if v == "none" {
		return ""
	}
	return v
}
