// Package ldap is an LDAP authentication and authorisation backend for
// the broker's auth seam, compatible with RabbitMQ 4.x's
// rabbitmq_auth_backend_ldap in its common settings: servers and port,
// user_dn_pattern or a DN lookup (dn_lookup_attribute, dn_lookup_base,
// dn_lookup_bind), other_bind, group_lookup_base, tag_queries,
// vhost_access_query, resource_access_query and topic_access_query
// (constant, exists, in_group, in_group_nested, for, not, and, or,
// equals, match, string, attribute), use_ssl / use_starttls, timeout,
// connection_pool_size and idle_timeout.
//
// New takes a plain Config whose fields are RabbitMQ's settings (the
// queries as written in advanced.config, parsed by ParseQuery), so that a
// rabbitmq.conf-style file maps onto it key by key; docs/authentication.md
// lists the keys beside the fields. A Backend is an auth.Authenticator
// and an auth.Authorizer; put it in Options.Auth with Backend.Backend,
// alone or after auth.Internal, and wrap it in an auth.Cache
// (rabbitmq_auth_backend_cache) to spare the directory.
//
// What it promises:
//   - A password is checked only by binding as the user. An empty
//     password is refused without asking the server (LDAP would take it
//     as an unauthenticated bind and say yes, RFC 4513 section 5.1.2).
//   - Values substituted into a DN are escaped as RFC 4514 attribute
//     values (except ${user_dn}, already a DN), into a filter as RFC 4515
//     assertion values, and into match's regular expression with
//     regexp.QuoteMeta: a user name holding ',', '*', ')(' or '.*' cannot
//     reach another entry, widen a search or widen a match.
//   - Wrong credentials, unknown or ambiguous users are refusals
//     (auth.ErrRefused); a directory that is unreachable, fails or does
//     not answer within Config.Timeout (or the caller's context) is an
//     error, which the broker answers as "try again". A hung server holds
//     a call no longer than that: its connection is closed under it.
//   - At most Config.PoolSize connections are open at once; calls beyond
//     that wait for one within their context.
//
// The LDAP client is github.com/go-ldap/ldap/v3, the maintained pure-Go
// LDAP v3 client most Go projects use (StartTLS, controls, no cgo).
package ldap
