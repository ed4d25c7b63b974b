// Command warren runs Warren as a standalone AMQP 0-9-1 broker.
//
//	go run ./cmd/warren                      # 127.0.0.1:5672, data in ~/.local/share/warren
//	go run ./cmd/warren -memory -addr :5673  # nothing on disk
//	go run ./cmd/warren -http 127.0.0.1:15672 -definitions defs.json
//
//	go run ./cmd/warren -tls-listen 127.0.0.1:5671 -tls-cert server.pem -tls-key server.key \
//	    -tls-ca clients-ca.pem -auth-mechanisms PLAIN,AMQPLAIN,EXTERNAL
//
// -http serves the web console at / (open http://ADDR/ in a browser and log
// in as a broker user; docs/console.md), RabbitMQ's management HTTP API
// under /api/ and Prometheus
// metrics at /metrics (summed over queues, naming none, open) and
// /metrics/per-object (per queue, for administrator and monitoring users),
// with at most -http-max-connections connections and the timeouts of
// broker.HTTPLimits, so that an HTTP flood cannot take the file
// descriptors AMQP needs; -definitions imports a RabbitMQ definitions file at
// start (its vhosts, users with their password hashes, permissions and
// topology, as RabbitMQ's import does).
//
// -node-id and -peers run the process as a member of a raft cluster (see
// package cluster), each member with its own -data. Members authenticate
// each other with a cluster secret, the same on every member (as
// RabbitMQ's Erlang cookie): -cluster-secret-file names a file holding it;
// without it the member uses cluster-secret in its -data directory, which
// a founding member's first start generates (and logs: copy that file into
// the other members' -data directories, or start them with
// -cluster-secret-file pointing at a copy). A member whose -data already
// holds raft state never generates one: it refuses to start without the
// cluster's. -raft-tls-cert, -raft-tls-key and -raft-tls-ca make the
// members talk mutual TLS instead (with -cluster-secret-file, as well);
// -raft-insecure turns authentication off, with a warning at start, for
// a network nobody else reaches.
//
// -tls-listen adds an AMQPS listener with the PEM certificate and key of
// -tls-cert and -tls-key. With -tls-ca, clients are asked for a
// certificate, which must then verify against that CA bundle (RabbitMQ's
// verify_peer without fail_if_no_peer_cert); with EXTERNAL among
// -auth-mechanisms such a client logs in as the user its certificate's CN
// names. -addr "" turns the plain listener off when -tls-listen is set.
//
// Without -data the data goes to the per-user data directory:
// $XDG_DATA_HOME/warren, else ~/.local/share/warren (macOS:
// ~/Library/Application Support/warren; Windows: %LocalAppData%\warren),
// wherever the server is started; the start-up log line names it
// (storage=...).
//
// -rabbitmq-version picks the RabbitMQ release whose answers Warren copies
// where releases differ (README's "RabbitMQ versions"): a series, such as
// -rabbitmq-version 4.4 (RabbitMQ 4.4.1, the newest 4.4 release Warren
// knows), or a release, such as -rabbitmq-version 4.3.2. The default is
// 3.13.
//
// -config reads RabbitMQ's rabbitmq.conf (the keys that map to Warren's
// settings; any other is refused with its line, or with -unknown-keys
// warn logged and ignored), WARREN_* variables (one
// per flag: WARREN_ADDR, WARREN_NODE_ID, ...) and the RabbitMQ variables
// that map (RABBITMQ_NODE_PORT, RABBITMQ_DEFAULT_USER, RABBITMQ_MNESIA_DIR,
// ...) set what the command line does not; -print-config shows every
// setting and where it came from. docs/configuration.md has the tables.
//
// It logs with slog to stderr (-log-format text or json, -log-level),
// prints the address it listens on to stdout, re-reads its settings on
// SIGHUP (the log level and, on a single node, the consumer timeout and
// the memory and disk alarm limits take effect; any other change is
// logged as needing a restart), and shuts down gracefully on SIGINT or SIGTERM:
// connected clients get connection.close 320 CONNECTION_FORCED.
package main
