//go:build linux

package server

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// fdLimitChild, set in the environment, makes TestFDLimitChild the server
// process of TestHTTPFloodLeavesAMQPDescriptors.
const fdLimitChild = "WARREN_FDLIMIT_CHILD"

// TestFDLimitChild is not a test of its own: run by
// TestHTTPFloodLeavesAMQPDescriptors as a child process, it lowers its
// file descriptor limit (ulimit -n) and serves the flags after "--" until
// SIGTERM.
func TestFDLimitChild(t *testing.T) {
	if os.Getenv(fdLimitChild) == "" {
		t.Skip("the server process of TestHTTPFloodLeavesAMQPDescriptors")
	}
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	lim.Cur = 64
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	var args []string
	for i, a := range os.Args {
		if a == "--" {
			args = os.Args[i+1:]
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	require.NoError(t, run(ctx, args, os.Stdout, os.Stderr))
}

// TestHTTPFloodLeavesAMQPDescriptors: a server limited to 64 file
// descriptors, flooded with 200 idle HTTP connections, still accepts AMQP
// clients. Before the management listener had a connection limit, the
// flood took every descriptor and AMQP's accept failed with "too many open
// files".
func TestHTTPFloodLeavesAMQPDescriptors(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFDLimitChild$", "--",
		"-memory", "-addr", "127.0.0.1:0", "-http", "127.0.0.1:0", "-http-max-connections", "16")
	cmd.Env = append(os.Environ(), fdLimitChild+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	addrs := map[string]string{}
	for len(addrs) < 2 && lines.Scan() {
		for _, prefix := range []string{"listening on ", "management on "} {
			if a, ok := strings.CutPrefix(lines.Text(), prefix); ok {
				addrs[prefix] = a
			}
		}
	}
	require.Len(t, addrs, 2, "the server printed its addresses")
	go func() {
		for lines.Scan() {
		}
	}()

	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 200 {
		c, err := net.Dial("tcp", addrs["management on "])
		require.NoError(t, err)
		flood = append(flood, c)
	}
	// Let the server take its pick of the flood before AMQP knocks.
	time.Sleep(200 * time.Millisecond)

	conn, err := amqp091.DialConfig("amqp://guest:guest@"+addrs["listening on "]+"/",
		amqp091.Config{Dial: amqp091.DefaultDial(10 * time.Second)})
	require.NoError(t, err, "AMQP accepts while HTTP is flooded")
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
}
