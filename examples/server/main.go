// Command server runs Warren as a standalone AMQP 0-9-1 broker.
//
//	go run ./examples/server                      # 127.0.0.1:5672, data in ./warren-data
//	go run ./examples/server -memory -addr :5673  # nothing on disk
//	go run ./examples/server -http 127.0.0.1:15672 -definitions defs.json
//
// -http serves RabbitMQ's management HTTP API under /api/ and Prometheus
// metrics at /metrics; -definitions imports a RabbitMQ definitions file at
// start (its vhosts are created; its users must be the -user/-password
// account, whose password its hash must verify).
//
// It logs with slog to stderr, prints the address it listens on to stdout,
// and shuts down gracefully on SIGINT or SIGTERM: connected clients get
// connection.close 320 CONNECTION_FORCED.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/warrenmq/broker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done. It prints "listening on <addr>" to stdout
// once clients can connect, and logs to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:5672", "address to listen on (host:port)")
	dataDir := fs.String("data", "./warren-data", "directory for persistent data (Pebble)")
	memory := fs.Bool("memory", false, "keep everything in memory; ignores -data")
	user := fs.String("user", "guest", "user name clients log in with")
	password := fs.String("password", "guest", "password for -user")
	verbose := fs.Bool("v", false, "log connection events at debug level")
	httpAddr := fs.String("http", "", "serve the management API (/api/) and metrics (/metrics) on this address")
	defsFile := fs.String("definitions", "", "import this RabbitMQ definitions file at start")
	remoteGuest := fs.Bool("allow-remote-guest", false, "let the guest user log in from non-loopback addresses (RabbitMQ refuses by default)")
	consumerTimeout := fs.Duration("consumer-timeout", 0, "close a channel that holds a delivery unacknowledged this long (0: 30m, negative: never)")
	product := fs.String("product", "", `product name in connection.start ("" means Warren; "RabbitMQ" for clients that gate features on it)`)
	if err := fs.Parse(args); err != nil {
		return err
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	opts := broker.Options{
		DataDir:          *dataDir,
		Users:            []broker.User{{Name: *user, Password: *password, Tags: []string{"administrator"}}},
		Logger:           logger,
		Product:          *product,
		AllowRemoteGuest: *remoteGuest,
		ConsumerTimeout:  *consumerTimeout,
	}
	if *memory {
		opts.DataDir = ""
	}
	var defs *broker.Definitions
	if *defsFile != "" {
		var err error
		if defs, err = readDefinitions(*defsFile); err != nil {
			return err
		}
		// Warren's vhosts are fixed at New: create the file's.
		opts.VHosts = []string{"/"}
		for _, v := range defs.VHosts {
			if v.Name != "/" {
				opts.VHosts = append(opts.VHosts, v.Name)
			}
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

	bound, err := b.Listen(*addr)
	if err != nil {
		b.Close()
		return err
	}
	storage := "memory"
	if opts.DataDir != "" {
		storage = opts.DataDir
	}
	logger.Info("warren listening", "addr", bound.String(), "storage", storage, "version", broker.Version)
	// The address, not the URL: the URL would print the password.
	fmt.Fprintln(stdout, "listening on", bound.String())

	var web *http.Server
	webDone := make(chan error, 1)
	if *httpAddr != "" {
		l, err := net.Listen("tcp", *httpAddr)
		if err != nil {
			b.Close()
			return fmt.Errorf("http: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/api/", b.ManagementHandler())
		mux.Handle("/metrics", b.MetricsHandler())
		web = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { webDone <- web.Serve(l) }()
		logger.Info("management API listening", "addr", l.Addr().String())
		fmt.Fprintln(stdout, "management on", l.Addr().String())
	}

	<-ctx.Done()
	logger.Info("shutting down")
	if web != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = web.Shutdown(sctx)
		cancel()
		if err := <-webDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("management API", "err", err)
		}
	}
	if err := b.Close(); err != nil && !errors.Is(err, broker.ErrClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}

func readDefinitions(path string) (*broker.Definitions, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return broker.ReadDefinitions(f)
}
