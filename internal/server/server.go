package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/definitions"
)

// Main runs the server with the process's arguments until SIGINT or
// SIGTERM, and exits 1 on an error: the whole of cmd/warren's main.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "warren:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done. It prints "listening on <addr>" to stdout
// once clients can connect, and logs to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("warren", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:5672", "address to listen on (host:port)")
	dataDir := fs.String("data", defaultDataDir(), "directory for persistent data (Pebble)")
	memory := fs.Bool("memory", false, "keep everything in memory; ignores -data")
	user := fs.String("user", "guest", "user name clients log in with")
	password := fs.String("password", "guest", "password for -user")
	verbose := fs.Bool("v", false, "log connection events at debug level")
	httpAddr := fs.String("http", "", "serve the management API (/api/) and metrics (/metrics, /metrics/per-object) on this address")
	httpMaxConns := fs.Int("http-max-connections", 0, "HTTP connections open at once on -http; more take an idle one's place or are closed (0: 256)")
	httpOrigins := fs.String("http-allow-origins", "", "origins (scheme://host[:port], comma-separated, or *) whose web pages may change things through the management API (RabbitMQ's management.cors.allow_origins)")
	defsFile := fs.String("definitions", "", "import this RabbitMQ definitions file at start")
	remoteGuest := fs.Bool("allow-remote-guest", false, "let the guest user log in from non-loopback addresses (RabbitMQ refuses by default)")
	consumerTimeout := fs.Duration("consumer-timeout", 0, "close a channel that holds a delivery unacknowledged this long (0: 30m, negative: never)")
	rabbitVersion := fs.String("rabbitmq-version", "", `RabbitMQ release whose behaviour to copy where versions differ: a series (3.13, 4.0, 4.1, 4.2, 4.3, 4.4: its newest release) or a release such as 4.3.2 ("" means 3.13)`)
	product := fs.String("product", "", `product name in connection.start ("" means Warren; "RabbitMQ" for clients that gate features on it)`)
	tlsAddr := fs.String("tls-listen", "", "also serve AMQP over TLS on this address (host:port); off when empty")
	tlsCert := fs.String("tls-cert", "", "PEM certificate (chain) of the TLS listener")
	tlsKey := fs.String("tls-key", "", "PEM private key of -tls-cert")
	tlsCA := fs.String("tls-ca", "", "PEM CA bundle for client certificates: when set, clients are asked for one and it must verify")
	memWatermark := fs.Int64("memory-high-watermark", 0, "block publishers while message bytes and caches held in memory exceed this (0: 40% of RAM or the cgroup limit, negative: off)")
	storeMemory := fs.Int64("store-memory", 0, "bytes of memory the Pebble store under -data may hold: its block cache, each memtable a quarter (0: a 64 MiB cache and 16 MiB memtables)")
	diskFreeLimit := fs.Int64("disk-free-limit", 0, "block publishers while the data directory's file system has fewer free bytes (0: 50 MB, negative: off)")
	mechanisms := fs.String("auth-mechanisms", "PLAIN,AMQPLAIN", "SASL mechanisms offered, comma-separated (PLAIN, AMQPLAIN, EXTERNAL)")
	nodeID := fs.Uint64("node-id", 0, "run as this member of a raft cluster (with -peers); every member serves AMQP on its -addr")
	peers := fs.String("peers", "", "cluster members, id=raft-host:port comma-separated, this node included")
	deadAfter := fs.Duration("dead-after", 0, "cluster: return a member's unacknowledged deliveries once the raft leader has not heard from it this long (0: 10s)")
	raftCert := fs.String("raft-tls-cert", "", "cluster: PEM certificate of this member (for server and client auth): members talk mutual TLS")
	raftKey := fs.String("raft-tls-key", "", "cluster: PEM private key of -raft-tls-cert")
	raftCA := fs.String("raft-tls-ca", "", "cluster: PEM CA bundle the other members' certificates must verify against")
	secretFile := fs.String("cluster-secret-file", "", "cluster: file holding the cluster secret, the same on every member (default: cluster-secret in -data, generated on a founding member's first start)")
	raftInsecure := fs.Bool("raft-insecure", false, "cluster: members do not authenticate each other: anyone who reaches a raft address can stop the cluster (only for a network nobody else reaches)")
	configFile := fs.String("config", os.Getenv("RABBITMQ_CONFIG_FILE"), "read settings from this rabbitmq.conf file (RabbitMQ's key = value format); flags given on the command line win (default: $RABBITMQ_CONFIG_FILE)")
	showVersion := fs.Bool("version", false, "print the version and build information and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		printVersion(stdout)
		return nil
	}
	if *configFile != "" {
		if err := applyConfigFile(fs, *configFile); err != nil {
			return err
		}
	}
	if (*nodeID == 0) != (*peers == "") {
		return errors.New("-node-id and -peers go together")
	}
	if *nodeID != 0 && (*memory || *defsFile != "") {
		return errors.New("a cluster node does not take -memory or -definitions: the raft group holds the data")
	}
	if *nodeID == 0 && (*deadAfter != 0 || *raftCert != "" || *raftKey != "" || *raftCA != "" || *secretFile != "" || *raftInsecure) {
		return errors.New("-dead-after, -raft-tls-*, -cluster-secret-file and -raft-insecure are for cluster nodes (-node-id, -peers)")
	}
	if *raftInsecure && (*secretFile != "" || *raftCert != "" || *raftKey != "" || *raftCA != "") {
		return errors.New("-raft-insecure turns member authentication off: it excludes -cluster-secret-file and -raft-tls-*")
	}
	raftTLS, err := memberTLS(*raftCert, *raftKey, *raftCA)
	if err != nil {
		return err
	}
	tlsConfig, err := serverTLS(*tlsAddr, *tlsCert, *tlsKey, *tlsCA)
	if err != nil {
		return err
	}
	if *addr == "" && *tlsAddr == "" {
		return errors.New("nothing to listen on: -addr and -tls-listen are both empty")
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	opts := broker.Options{
		DataDir:          *dataDir,
		StoreMemory:      *storeMemory,
		Users:            []broker.User{{Name: *user, Password: *password, Tags: []string{"administrator"}}},
		Logger:           logger,
		Product:          *product,
		AllowRemoteGuest: *remoteGuest,
		ConsumerTimeout:  *consumerTimeout,
		RabbitMQVersion:  *rabbitVersion,
		TLSConfig:        tlsConfig,
		AuthMechanisms:   splitList(*mechanisms),

		ManagementAllowedOrigins: splitList(*httpOrigins),

		MemoryHighWatermark: *memWatermark,
		DiskFreeLimit:       *diskFreeLimit,
	}
	if *memory {
		opts.DataDir = ""
	}
	if *nodeID != 0 {
		return runCluster(ctx, clusterFlags{
			id: *nodeID, peers: *peers, addr: *addr, tlsAddr: *tlsAddr, httpAddr: *httpAddr,
			httpLimits: broker.HTTPLimits{MaxConnections: *httpMaxConns},
			dataDir:    *dataDir, deadAfter: *deadAfter, raftTLS: raftTLS,
			secretFile: *secretFile, insecure: *raftInsecure,
		}, opts, stdout, logger)
	}
	var defs *definitions.File
	if *defsFile != "" {
		var err error
		// Imported after New: the import creates the file's vhosts,
		// users and permissions itself.
		if defs, err = readDefinitions(*defsFile); err != nil {
			return err
		}
	}
	b, err := broker.New(opts)
	if err != nil {
		return err
	}
	if defs != nil {
		if err := b.ImportDefinitions(ctx, defs); err != nil {
			b.Close()
			return err
		}
		logger.Info("imported definitions", "file", *defsFile, "exchanges", len(defs.Exchanges), "queues", len(defs.Queues), "bindings", len(defs.Bindings))
	}

	storage := "memory"
	if opts.DataDir != "" {
		storage = absDir(opts.DataDir)
	}
	if *addr != "" {
		bound, err := b.Listen(*addr)
		if err != nil {
			b.Close()
			return err
		}
		logger.Info("warren listening", "addr", bound.String(), "storage", storage, "version", broker.Version)
		// The address, not the URL: the URL would print the password.
		fmt.Fprintln(stdout, "listening on", bound.String())
	}
	if *tlsAddr != "" {
		bound, err := b.ListenTLS(*tlsAddr)
		if err != nil {
			b.Close()
			return err
		}
		logger.Info("warren listening (TLS)", "addr", bound.String(), "storage", storage, "version", broker.Version,
			"client_certificates", tlsConfig.ClientAuth != tls.NoClientCert)
		fmt.Fprintln(stdout, "tls listening on", bound.String())
	}

	stopWeb := func() {}
	if *httpAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/", b.ManagementHandler()) // the console at /, the API under /api/
		mux.Handle("/metrics", b.MetricsHandler())
		mux.Handle("/metrics/per-object", b.MetricsHandlerWith(perObjectMetrics))
		lim := broker.HTTPLimits{MaxConnections: *httpMaxConns}
		if stopWeb, err = serveHTTP(*httpAddr, mux, lim, stdout, logger); err != nil {
			b.Close()
			return err
		}
	}

	<-ctx.Done()
	logger.Info("shutting down")
	stopWeb()
	if err := b.Close(); err != nil && !errors.Is(err, broker.ErrClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}

// printVersion writes Warren's version and, from runtime/debug, the
// module version, Go version and VCS revision the binary was built from.
func printVersion(w io.Writer) {
	fmt.Fprintln(w, "warren", broker.Version)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	fmt.Fprintln(w, "module", bi.Main.Path, bi.Main.Version)
	fmt.Fprintln(w, "go", bi.GoVersion)
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" || s.Key == "vcs.time" || s.Key == "vcs.modified" {
			fmt.Fprintln(w, s.Key, s.Value)
		}
	}
}

// serverTLS builds the TLS listener's config from the flags; nil when
// -tls-listen is off (the other TLS flags must then be unset too, so a
// typo cannot silently serve without TLS).
func serverTLS(addr, certFile, keyFile, caFile string) (*tls.Config, error) {
	if addr == "" {
		if certFile != "" || keyFile != "" || caFile != "" {
			return nil, errors.New("-tls-cert, -tls-key and -tls-ca need -tls-listen")
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("-tls-listen needs -tls-cert and -tls-key")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadCAs(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		cfg.ClientCAs = pool
		// RabbitMQ's verify_peer with fail_if_no_peer_cert=false: a
		// certificate is asked for and, if sent, must verify.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// perObjectMetrics is RabbitMQ's /metrics/per-object, which names every
// vhost and queue: only for administrator and monitoring users.
var perObjectMetrics = broker.MetricsOptions{PerObject: true, Authenticate: true}

// serveHTTP serves the management API handler h on addr, within lim's
// connection limit and timeouts, until stop, which shuts it down (waiting
// up to 5 s for requests in flight).
func serveHTTP(addr string, h http.Handler, lim broker.HTTPLimits, stdout io.Writer, logger *slog.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	web := lim.Server(h)
	done := make(chan error, 1)
	go func() { done <- web.Serve(lim.Listener(l)) }()
	logger.Info("management API listening", "addr", l.Addr().String())
	fmt.Fprintln(stdout, "management on", l.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = web.Shutdown(ctx)
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("management API", "err", err)
		}
	}, nil
}

// loadCAs reads a PEM bundle of CA certificates.
func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", file)
	}
	return pool, nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func readDefinitions(path string) (*definitions.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return definitions.Read(f)
}
