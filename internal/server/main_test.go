package server

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

func TestRunServesUntilCancelled(t *testing.T) {
	for _, args := range [][]string{
		{"-memory", "-addr", "127.0.0.1:0", "-user", "app", "-password", "pw"},
		{"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-user", "app", "-password", "pw"},
		{"-allow-remote-guest", "-consumer-timeout", "45s", "-memory", "-addr", "127.0.0.1:0", "-user", "app", "-password", "pw"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			addr, stop := serve(t, args)
			conn, err := amqp091.Dial("amqp://app:pw@" + addr + "/")
			require.NoError(t, err)
			closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
			ch, err := conn.Channel()
			require.NoError(t, err)
			require.NoError(t, ch.Close())

			require.NoError(t, stop())
			cerr := <-closed
			require.NotNil(t, cerr)
			require.Equal(t, amqp091.ConnectionForced, cerr.Code)
		})
	}
}

// TestRunRabbitMQVersion: -rabbitmq-version 4.4 answers as RabbitMQ
// 4.4.1, the newest 4.4 release Warren knows, and says so in
// connection.start.
func TestRunRabbitMQVersion(t *testing.T) {
	addr, stop := serve(t, []string{"-memory", "-addr", "127.0.0.1:0", "-user", "app", "-password", "pw", "-rabbitmq-version", "4.4"})
	conn, err := amqp091.Dial("amqp://app:pw@" + addr + "/")
	require.NoError(t, err)
	require.Equal(t, "4.4.1", conn.Properties["version"])
	require.NoError(t, conn.Close())
	require.NoError(t, stop())
}

// serve runs the server with args until stop, which cancels it and
// returns run's error; addr is where it listens.
func serve(t *testing.T, args []string) (addr string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, stdoutW, io.Discard)
		stdoutW.Close()
	}()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	require.NoError(t, err)
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	require.True(t, ok, "first line %q", line)
	go io.Copy(io.Discard, stdoutR)
	return addr, func() error {
		cancel()
		return <-done
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	err := run(context.Background(), []string{"-nope"}, io.Discard, io.Discard)
	require.Error(t, err)
	err = run(context.Background(), []string{"-addr", "not an address"}, io.Discard, io.Discard)
	require.Error(t, err)
	err = run(context.Background(), []string{"-consumer-timeout", "soon"}, io.Discard, io.Discard)
	require.Error(t, err)
	err = run(context.Background(), []string{"-memory", "-addr", "127.0.0.1:0", "-rabbitmq-version", "4.5"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, `unknown RabbitMQ version "4.5"`)
}

// TestDefaultDataDir: without -data the data goes to the per-user data
// directory ($XDG_DATA_HOME/warren), wherever the server is started, and
// the start-up log names it by its absolute path. It used to be
// ./warren-data in whatever directory the server was run from.
func TestDefaultDataDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_DATA_HOME", home)
	t.Chdir(t.TempDir())
	var logs amqptest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, stdoutW, &logs)
		stdoutW.Close()
	}()
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "listening on "), "first line %q", line)
	go io.Copy(io.Discard, stdoutR)
	cancel()
	require.NoError(t, <-done)

	want := filepath.Join(home, "warren")
	_, err = os.Stat(filepath.Join(want, "LOCK"))
	require.NoError(t, err, "no database in %s", want)
	_, err = os.Stat("warren-data")
	require.ErrorIs(t, err, os.ErrNotExist, "nothing in the working directory")
	require.Contains(t, logs.String(), "storage="+want)

	for _, tc := range []struct{ xdg, home, want string }{
		{"/srv/xdg", "/home/u", "/srv/xdg/warren"},
		{"relative", "/home/u", "/home/u/.local/share/warren"},
		{"", "/home/u", "/home/u/.local/share/warren"},
	} {
		if runtime.GOOS == "windows" || runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
			t.Skip("XDG paths are for the other systems")
		}
		t.Setenv("XDG_DATA_HOME", tc.xdg)
		t.Setenv("HOME", tc.home)
		require.Equal(t, tc.want, defaultDataDir(), "XDG_DATA_HOME=%q HOME=%q", tc.xdg, tc.home)
	}
}
