package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/warrenproc"
)

// serverProcess is the server (cmd/warren) as a child process.
type serverProcess = warrenproc.Process

// buildServer compiles the server into a temporary directory.
func buildServer(t testing.TB) string { return warrenproc.Build(t) }

// killableServer starts the server on a fresh data directory for a
// test that SIGKILLs it (skipped where there is no SIGKILL); restart starts
// it again on the same directory.
func killableServer(t *testing.T) (srv *serverProcess, restart func() *serverProcess) {
	t.Helper()
	bin := warrenproc.Build(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(dataDir, 0o755))
	return startServer(t, bin, dataDir), func() *serverProcess { return startServer(t, bin, dataDir) }
}

// startServer runs bin on dataDir (warrenproc.Start).
func startServer(t testing.TB, bin, dataDir string, extra ...string) *serverProcess {
	t.Helper()
	return warrenproc.Start(t, bin, dataDir, extra...)
}

// A broker killed with SIGKILL while a publisher streams persistent
// messages with confirms keeps every message it confirmed.
func TestEngineKill9KeepsConfirmedMessages(t *testing.T) {
	srv, restart := killableServer(t)

	conn, err := amqp091.Dial(srv.URL())
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
			srv.Kill(t) // mid-stream
			killed = true
		}
	}
	wg.Wait()
	sent := <-published
	require.True(t, killed, "the stream finished before the kill")
	require.NotEmpty(t, confirmed)
	t.Logf("published %d, confirmed %d before SIGKILL", sent, len(confirmed))

	srv2 := restart()
	conn2, err := amqp091.Dial(srv2.URL())
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
