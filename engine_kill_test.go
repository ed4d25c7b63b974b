package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// serverProcess is examples/server running as a child process.
type serverProcess struct {
	cmd  *exec.Cmd
	addr string
	// http receives the management and metrics address, printed after
	// the AMQP one when extra has -http.
	http chan string
	done chan struct{} // closed when the process has exited and been reaped
}

// buildServer compiles examples/server into a temporary directory.
func buildServer(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "warren-server")
	build := exec.Command(goBin, "build", "-o", bin, "./examples/server")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// killableServer starts examples/server on a fresh data directory for a
// test that SIGKILLs it (skipped where there is no SIGKILL); restart starts
// it again on the same directory.
func killableServer(t *testing.T) (srv *serverProcess, restart func() *serverProcess) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	bin := buildServer(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(dataDir, 0o755))
	return startServer(t, bin, dataDir), func() *serverProcess { return startServer(t, bin, dataDir) }
}

// startServer runs bin on dataDir with a port the kernel picks, and waits
// for the address it prints once clients can connect; extra are further
// flags (with -http, the management address it prints is p.http).
func startServer(t testing.TB, bin, dataDir string, extra ...string) *serverProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-data", dataDir, "-addr", "127.0.0.1:0"}, extra...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	p := &serverProcess{cmd: cmd, done: make(chan struct{}), http: make(chan string, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "management on "); ok {
				p.http <- addr
			}
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				lines <- addr
			}
		}
		// Wait only after the pipe is drained (os/exec's rule).
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill(t) })
	select {
	case p.addr = <-lines:
	case <-p.done:
		t.Fatal("server exited before listening")
	case <-time.After(amqptest.Timeout):
		t.Fatal("server did not start listening")
	}
	return p
}

func (p *serverProcess) url() string { return fmt.Sprintf("amqp://guest:guest@%s/", p.addr) }

// kill sends SIGKILL, the kill -9 the test is about, and reaps the process.
func (p *serverProcess) kill(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(amqptest.Timeout):
		t.Error("server did not exit after SIGKILL")
	}
}

// A broker killed with SIGKILL while a publisher streams persistent
// messages with confirms keeps every message it confirmed.
func TestEngineKill9KeepsConfirmedMessages(t *testing.T) {
	srv, restart := killableServer(t)

	conn, err := amqp091.Dial(srv.url())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("stream", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	const n = 3000
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))

	// Publish in the background; the channel's sequence numbers are
	// 1..n in publish order, so tag i confirms body i-1.
	var wg sync.WaitGroup
	published := make(chan int, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		i := 0
		for ; i < n; i++ {
			err := ch.PublishWithContext(context.Background(), "", "stream", false, false,
				amqp091.Publishing{Body: []byte(fmt.Sprintf("m-%d", i)), DeliveryMode: amqp091.Persistent})
			if err != nil {
				break // the broker died under us
			}
		}
		published <- i
	}()

	confirmed := make(map[string]bool)
	killed := false
	for c := range confirms { // closed when the connection dies
		if c.Ack {
			confirmed[fmt.Sprintf("m-%d", c.DeliveryTag-1)] = true
		}
		if !killed && len(confirmed) >= n/3 {
			srv.kill(t) // mid-stream
			killed = true
		}
	}
	wg.Wait()
	sent := <-published
	require.True(t, killed, "the stream finished before the kill")
	require.NotEmpty(t, confirmed)
	t.Logf("published %d, confirmed %d before SIGKILL", sent, len(confirmed))

	srv2 := restart()
	conn2, err := amqp091.Dial(srv2.url())
	require.NoError(t, err)
	defer conn2.Close()
	ch2, err := conn2.Channel()
	require.NoError(t, err)
	require.NoError(t, ch2.Qos(500, 0, false))
	q, err := ch2.QueueDeclarePassive("stream", true, false, false, false, nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, q.Messages, len(confirmed))
	msgs, err := ch2.Consume("stream", "", false, false, false, false, nil)
	require.NoError(t, err)
	seen := make(map[string]bool, q.Messages)
	for range q.Messages {
		d := amqptest.Next(t, msgs)
		require.False(t, seen[string(d.Body)], "%s stored twice", d.Body)
		require.False(t, d.Redelivered, "nothing was ever delivered")
		seen[string(d.Body)] = true
		require.NoError(t, d.Ack(false))
	}
	for body := range confirmed {
		require.True(t, seen[body], "confirmed message %s lost", body)
	}
	// Unconfirmed messages may or may not have made it; nothing else may.
	for body := range seen {
		var i int
		_, err := fmt.Sscanf(body, "m-%d", &i)
		require.NoError(t, err)
		require.Less(t, i, sent)
	}
}
