package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/definitions"
)

// Main runs the server with the process's arguments until SIGINT or
// SIGTERM, re-reading its settings on SIGHUP, and exits 1 on an error:
// the whole of cmd/warren's main.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if err := runServer(ctx, os.Args[1:], os.Stdout, os.Stderr, hup); err != nil {
		fmt.Fprintln(os.Stderr, "warren:", err)
		os.Exit(1)
	}
}

// run is runServer without reloads.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runServer(ctx, args, stdout, stderr, nil)
}

// runServer serves until ctx is done, re-reading its settings at each value
// from hup (reload). It prints "listening on <addr>" to stdout once
// clients can connect, and logs to stderr.
func runServer(ctx context.Context, args []string, stdout, stderr io.Writer, hup <-chan os.Signal) error {
	s, err := loadSettings(args, stderr)
	if err != nil {
		return err
	}
	if *s.showVersion {
		printVersion(stdout)
		return nil
	}
	level, err := s.level()
	if err != nil {
		return err
	}
	levelVar := new(slog.LevelVar)
	levelVar.Set(level)
	logger, err := s.newLogger(stderr, levelVar)
	if err != nil {
		return err
	}
	s.auth.setLogger(logger)
	defer s.auth.close()
	for _, ig := range s.ignored {
		logger.Warn("config: key ignored (-unknown-keys warn)", "key", ig)
	}
	addr, dataDir, memory, defsFile, httpAddr := s.addr, s.dataDir, s.memory, s.defsFile, s.httpAddr
	nodeID, peers, deadAfter := s.nodeID, s.peers, s.deadAfter
	raftCert, raftKey, raftCA, secretFile, raftInsecure := s.raftCert, s.raftKey, s.raftCA, s.secretFile, s.raftInsecure
	tlsAddr, httpMaxConns := s.tlsAddr, s.httpMaxConns
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
	tlsConfig, err := serverTLS(*tlsAddr, *s.tlsCert, *s.tlsKey, *s.tlsCA)
	if err != nil {
		return err
	}
	if *addr == "" && *tlsAddr == "" {
		return errors.New("nothing to listen on: -addr and -tls-listen are both empty")
	}
	if *s.frameMax > 1<<32-1 || *s.channelMax > 65535 || *s.maxMessageSize > 1<<31-1 {
		return errors.New("-frame-max is at most 4294967295, -channel-max 65535 and -max-message-size 2147483647")
	}
	if *s.printIt {
		return s.print(stdout)
	}
	live := new(atomic.Pointer[broker.Broker]) // the single node's broker, for reloads
	if hup != nil {
		// Its own context, so that the watcher also ends when the start
		// fails.
		rctx, stopReload := context.WithCancel(ctx)
		defer stopReload()
		go watchReload(rctx, hup, args, s, levelVar, live, logger)
	}

	opts := broker.Options{
		DataDir:          *dataDir,
		Storage:          broker.StorageOptions{Memory: *s.storeMemory},
		Users:            []broker.User{{Name: *s.user, Password: *s.password, Tags: []string{"administrator"}}},
		Logger:           logger,
		Product:          *s.product,
		AllowRemoteGuest: *s.remoteGuest,
		ConsumerTimeout:  *s.consumerTimeout,
		Heartbeat:        *s.heartbeat,
		FrameMax:         uint32(*s.frameMax),
		ChannelMax:       uint16(*s.channelMax),
		MaxMessageSize:   int(*s.maxMessageSize),
		RabbitMQVersion:  *s.rabbitVersion,
		TLSConfig:        tlsConfig,
		AuthMechanisms:   splitList(*s.mechanisms),

		Management: broker.ManagementOptions{AllowedOrigins: splitList(*s.httpOrigins)},

		MemoryHighWatermark: *s.memWatermark,
		DiskFreeLimit:       *s.diskFreeLimit,

		Auth: s.auth.chain, // rabbitmq.conf's auth_backends (auth_config.go)
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
			queueGroups: *s.queueGroups, queueGroupsOver: *s.queueGroupsOver, leaderLocator: *s.leaderLocator,
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
	live.Store(b)
	if defs != nil {
		if err := b.Admin().Import(ctx, defs); err != nil {
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
		logger.Info("warren listening", "addr", bound.String(), "storage", storage, "version", broker.Version, "revision", buildRevision())
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
		mux.Handle("/metrics", b.MetricsHandler(broker.MetricsOptions{}))
		mux.Handle("/metrics/per-object", b.MetricsHandler(perObjectMetrics))
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

// buildRevision is the VCS revision the binary was built from
// (runtime/debug's vcs.revision, "+dirty" when vcs.modified), "" when the
// build recorded none.
func buildRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
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
