// Command server runs Warren as a standalone AMQP 0-9-1 broker.
//
//	go run ./examples/server                      # 127.0.0.1:5672, data in ./warren-data
//	go run ./examples/server -memory -addr :5673  # nothing on disk
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
	"os"
	"os/signal"
	"syscall"

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
	if err := fs.Parse(args); err != nil {
		return err
	}

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	opts := broker.Options{
		DataDir: *dataDir,
		Users:   []broker.User{{Name: *user, Password: *password, Tags: []string{"administrator"}}},
		Logger:  logger,
	}
	if *memory {
		opts.DataDir = ""
	}
	b, err := broker.New(opts)
	if err != nil {
		return err
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

	<-ctx.Done()
	logger.Info("shutting down")
	if err := b.Close(); err != nil && !errors.Is(err, broker.ErrClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}
