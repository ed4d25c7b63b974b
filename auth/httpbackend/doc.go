// Package httpbackend is an auth backend that asks an HTTP service, as
// RabbitMQ 4.x's rabbitmq_auth_backend_http does, so that a service written
// for that plugin decides Warren's logins and permissions unchanged.
//
// Four URLs answer four questions (RabbitMQ's auth_http.* settings):
//
//	user_path      username, password                     "allow [tag ...]" | "deny [reason]"
//	vhost_path     username, vhost, ip, tags              "allow" | "deny [reason]"
//	resource_path  username, vhost, resource, name,       "allow" | "deny [reason]"
//	               permission, tags
//	topic_path     username, vhost, resource=topic, name, "allow" | "deny [reason]"
//	               permission, tags, routing_key,
//	               variable_map.username, variable_map.vhost
//
// The parameters go in the query string of a GET (the default) or in an
// application/x-www-form-urlencoded POST body (http_method = post). The
// answer is the response body, trimmed of spaces and read case-insensitively;
// tags come back lower-cased, as RabbitMQ reads them.
//
// What it promises: "deny" is a refusal (auth.ErrRefused for a login,
// false for a permission); anything else that is not "allow" — another
// status than 200 or 201, an unreadable body, a timeout, a service that
// cannot be reached — is an error, which the broker answers as "try
// again", never as a refusal. Every request is bounded by the caller's
// context (the broker's Options.LoginTimeout) and by RequestTimeout, and
// at most MaxConcurrent requests are in flight; a question that cannot get
// a slot before its context ends is an error too, so a slow or hanging
// service holds up only the questions that wait for it, never the broker.
// A Backend is safe for concurrent use.
package httpbackend
