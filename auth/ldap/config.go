package ldap

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"time"
)

// Config is the backend's configuration, field for field RabbitMQ's
// rabbitmq_auth_backend_ldap settings (auth_ldap.* in rabbitmq.conf; the
// queries as in advanced.config). Its zero values are RabbitMQ's
// defaults. Everything is a plain value, so a config file maps onto it
// key by key; New checks it.
type Config struct {
	// Servers are tried in order until one connects (auth_ldap.servers.N):
	// host names or addresses, each optionally with its own ":port".
	Servers []string
	// Port is auth_ldap.port: 389, or 636 with UseSSL, when 0.
	Port int
	// UseSSL connects with TLS from the start (ldaps, auth_ldap.use_ssl);
	// UseStartTLS upgrades a plain connection with StartTLS
	// (auth_ldap.use_starttls) before anything is sent.
	UseSSL, UseStartTLS bool
	// SSL is auth_ldap.ssl_options.*, read when TLSConfig is nil.
	SSL SSLOptions
	// TLSConfig, when set, is used for TLS and StartTLS as given (an
	// embedder's own); ServerName defaults to the server's host.
	TLSConfig *tls.Config

	// UserDNPattern turns a user name into the DN to bind as
	// (auth_ldap.user_dn_pattern, default "${username}"). The name is
	// escaped as an RFC 4514 attribute value.
	UserDNPattern string
	// UserBindPattern, when set, is the name the user binds with instead
	// of the filled UserDNPattern (auth_ldap.user_bind_pattern), such as
	// Active Directory's "${ad_user}@${ad_domain}.example.com". The user
	// name DOMAIN\user gives ${ad_domain} and ${ad_user} everywhere.
	UserBindPattern string
	// DNLookupAttribute and DNLookupBase, when both set, find the user's
	// DN by a search of DNLookupBase for DNLookupAttribute = the filled
	// UserDNPattern (auth_ldap.dn_lookup_attribute, dn_lookup_base).
	DNLookupAttribute, DNLookupBase string
	// DNLookupBind is who searches for the DN (auth_ldap.dn_lookup_bind):
	// as the user (the zero Bind: bind with the filled UserDNPattern
	// first, as Active Directory's user@domain allows), anonymously, or
	// as a service account.
	DNLookupBind Bind
	// OtherBind is who runs the tag, vhost, resource and topic queries
	// (auth_ldap.other_bind): as the user (the zero Bind, with the
	// password of the user's latest login through this backend),
	// anonymously, or as a service account.
	OtherBind Bind

	// GroupLookupBase is where in_group_nested searches for groups
	// (auth_ldap.group_lookup_base; DNLookupBase when empty).
	GroupLookupBase string

	// TagQueries maps a user tag (administrator, management, ...) to the
	// query that grants it (tag_queries); RabbitMQ's default grants none.
	TagQueries map[string]string
	// VHostAccessQuery, ResourceAccessQuery and TopicAccessQuery decide
	// access (vhost_access_query, resource_access_query,
	// topic_access_query); empty means {constant, true}, RabbitMQ's
	// default.
	VHostAccessQuery, ResourceAccessQuery, TopicAccessQuery string

	// Timeout bounds each call into the backend (a login or one
	// decision, connecting included): auth_ldap.timeout. 0 is RabbitMQ's
	// infinity: only the caller's context (the broker's login timeout)
	// bounds it.
	Timeout time.Duration
	// PoolSize bounds the connections open to the servers at once
	// (auth_ldap.connection_pool_size, default 64); a call waits for one
	// within its context.
	PoolSize int
	// IdleTimeout closes a pooled connection unused this long
	// (auth_ldap.idle_timeout, default 300s; negative: never).
	IdleTimeout time.Duration

	// Logger, when set, receives each login and decision: at info level
	// when Log is set (auth_ldap.log = true), else at debug level.
	// Passwords are never logged.
	Logger *slog.Logger
	Log    bool
}

// Bind is how the backend binds for a lookup or a query: as the user
// logging in (the zero Bind, RabbitMQ's as_user), anonymously (anon), or
// as DN with Password (RabbitMQ's {UserDN, Password}).
type Bind struct {
	Anon     bool
	DN       string
	Password string
}

func (b Bind) asUser() bool { return !b.Anon && b.DN == "" }

// SSLOptions are the auth_ldap.ssl_options.* RabbitMQ users set most:
// the CA file to verify the server with (system roots when empty), a
// client certificate and key, verify_none, and the server name checked
// (server_name_indication; default the server's host).
type SSLOptions struct {
	CACertFile, CertFile, KeyFile string
	VerifyNone                    bool
	ServerName                    string
}

// tag is one compiled tag query.
type tag struct {
	name string
	q    Query
}

// compiled is a checked Config.
type compiled struct {
	Config
	tls                       *tls.Config
	tags                      []tag
	vhostQ, resourceQ, topicQ Query
	lookup                    bool
}

// compile fills in RabbitMQ's defaults, checks c and parses its
// queries, so that a bad setting fails New rather than a login.
func compile(c Config) (*compiled, error) {
	if len(c.Servers) == 0 {
		return nil, errors.New("ldap: no servers (auth_ldap.servers.1)")
	}
	if c.UseSSL && c.UseStartTLS {
		return nil, errors.New("ldap: use_ssl and use_starttls are exclusive")
	}
	if c.Port == 0 {
		c.Port = 389
		if c.UseSSL {
			c.Port = 636
		}
	}
	if c.Port < 0 || c.Port > 65535 {
		return nil, fmt.Errorf("ldap: port %d out of range", c.Port)
	}
	if c.UserDNPattern == "" {
		c.UserDNPattern = "${username}"
	}
	if c.PoolSize == 0 {
		c.PoolSize = 64
	}
	if c.PoolSize < 0 {
		return nil, fmt.Errorf("ldap: connection_pool_size %d is negative", c.PoolSize)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 300 * time.Second
	}
	if c.Timeout < 0 {
		return nil, fmt.Errorf("ldap: timeout %v is negative", c.Timeout)
	}
	k := &compiled{Config: c}
	switch {
	case c.DNLookupAttribute != "" && c.DNLookupBase != "":
		if !validAttr(c.DNLookupAttribute) {
			return nil, fmt.Errorf("ldap: dn_lookup_attribute %q is not an attribute name", c.DNLookupAttribute)
		}
		k.lookup = true
	case c.DNLookupAttribute != "" || c.DNLookupBase != "":
		return nil, errors.New("ldap: dn_lookup_attribute and dn_lookup_base go together")
	}
	for _, b := range []Bind{c.DNLookupBind, c.OtherBind} {
		if b.DN != "" && b.Password == "" {
			return nil, fmt.Errorf("ldap: bind as %q without a password", b.DN)
		}
		if b.Anon && b.DN != "" {
			return nil, errors.New("ldap: a bind is either anon or a DN and password")
		}
	}
	var err error
	parse := func(key, src string) Query {
		if src == "" {
			return Query{src: "{constant, true}", root: constNode(true)}
		}
		q, perr := ParseQuery(src)
		if perr != nil && err == nil {
			err = fmt.Errorf("%s: %w", key, perr)
		}
		return q
	}
	k.vhostQ = parse("vhost_access_query", c.VHostAccessQuery)
	k.resourceQ = parse("resource_access_query", c.ResourceAccessQuery)
	k.topicQ = parse("topic_access_query", c.TopicAccessQuery)
	names := make([]string, 0, len(c.TagQueries))
	for n := range c.TagQueries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		q, perr := ParseQuery(c.TagQueries[n])
		if perr != nil {
			return nil, fmt.Errorf("tag_queries %s: %w", n, perr)
		}
		k.tags = append(k.tags, tag{n, q})
	}
	if err != nil {
		return nil, err
	}
	if c.UseSSL || c.UseStartTLS {
		if k.tls, err = tlsConfig(c); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// tlsConfig is Config.TLSConfig, or one built from Config.SSL's files.
func tlsConfig(c Config) (*tls.Config, error) {
	if c.TLSConfig != nil {
		return c.TLSConfig.Clone(), nil
	}
	t := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.SSL.ServerName,
		InsecureSkipVerify: c.SSL.VerifyNone,
	}
	if c.SSL.CACertFile != "" {
		pem, err := os.ReadFile(c.SSL.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("ldap: ssl_options.cacertfile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ldap: ssl_options.cacertfile %s: no PEM certificate", c.SSL.CACertFile)
		}
		t.RootCAs = pool
	}
	if c.SSL.CertFile != "" || c.SSL.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.SSL.CertFile, c.SSL.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("ldap: ssl_options.certfile/keyfile: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}
