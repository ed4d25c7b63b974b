// Package mgmt is Warren's management HTTP API: the commonly used part of
// RabbitMQ's management plugin under /api/, with the JSON shapes RabbitMQ
// 3.10 returns (fields Warren has no value for, such as per-channel rates
// and Erlang process details, are left out rather than invented; rates
// and their samples come from the broker's history, rates.go), plus
// the HTTP server and listener limits (HTTPLimits) that the management and
// metrics handlers are served with.
//
// New builds the handler from a Broker, the small read/write model this
// package owns: snapshots of vhosts, exchanges, queues with their counts,
// bindings, connections with their channels and consumers, users and
// permissions; logins; declarations and deletions acting as a connection of
// their own; a direct channel opened as a given user on a given vhost (for
// POST /api/queues/v/q/get, POST /api/exchanges/v/x/publish (publish.go)
// and the aliveness test); closing a
// connection; creating and deleting vhosts, users and permissions;
// vhost metadata, vhost limits and topic permissions (the Settings part
// of Broker); node status and listeners
// (the health checks, health.go); the definitions export and import
// (package definitions); and, through the optional Policies interface,
// policies and operator policies (/api/policies, /api/operator-policies
// and the policy fields of queue and exchange objects, policies.go);
// through the optional UnackedLister, a queue's unacked deliveries with
// their channel and age (GET /api/queues/v/q/unacked, a Warren extension,
// unacked.go). Listings of queues, exchanges, connections and channels
// take RabbitMQ's page, page_size, name, use_regex, sort and sort_reverse
// (paging.go); a page of queues by name asks only that page's queues for
// their counts. The root package
// implements Broker with an adapter over its own Broker
// (Broker.ManagementHandler returns New's handler), so nothing here
// reaches into the broker's fields, and a test can feed the handler any
// model.
//
// Each resource has a file that declares its routes (its ...Routes
// method, which register calls) and serves them: overview.go, vhosts.go,
// users.go, permissions.go, topicpermissions.go, vhostlimits.go,
// policies.go, exchanges.go (with delayed.go and publish.go), queues.go
// (with get.go and unacked.go), bindings.go, connections.go,
// channels.go, consumers.go, definitions.go and health.go; a new
// endpoint is one handle call there and its method beside it. handler.go
// routes them with a net/http ServeMux (method and wildcard patterns) and
// checks the login and the tags a route needs; request.go and respond.go
// are what every resource reads requests and answers with. A path
// parameter is its segment unescaped after the path is split (the vhost
// "/" is "%2F"), and paths route as the hand-made router before the
// ServeMux routed them (routable; TestRoutingMatchesSegmentRouter).
//
// What the handler promises:
//
//   - Who may do what is RabbitMQ 4.x's rabbit_mgmt_util (access.go lists
//     the rules): a user needs a management tag, administrators see and
//     change everything, management users see their own vhosts and
//     connections, and every write runs with the requesting user's AMQP
//     permissions.
//   - Logins go through Accounts.Authenticate, which applies the AMQP
//     login throttle; a user store that does not answer is 503, not 401.
//   - Request bodies are bounded (1 MiB; definitions 64 MiB, 413 beyond),
//     names and arguments meet the limits AMQP's do, a get holds one
//     message at a time however many it returns, and no input makes the
//     handler panic or answer 500 (FuzzManagementAPI).
//   - A browser's saved credentials cannot be used by another site
//     (csrf.go): a change a page of another origin asks for is 403 (the
//     origins Config.AllowOrigins lists excepted, with CORS answers), and
//     a change's body must be application/json (415), multipart/form-data
//     also for the definitions upload. OPTIONS is answered as RabbitMQ
//     does, without a login.
//   - HTTPLimits' listener gives each source a share of its connections
//     until they log in, and at its cap puts a new connection in an idle
//     one's place (httplimits.go), so a client holding sockets cannot
//     lock administrators out.
//   - Errors are RabbitMQ's {"error": ..., "reason": ...} objects with the
//     status RabbitMQ's plugin uses for the AMQP reply code; a failed
//     health check or aliveness test is 503 with RabbitMQ's
//     {"status": "failed", "reason": ...}.
//
// The handler keeps no state between requests; it is safe for concurrent
// use as far as the Broker it is given is, and every Broker method is
// called concurrently.
package mgmt
