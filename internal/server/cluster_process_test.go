package server

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestClusterProcessesSurviveKill9: three server processes form a
// cluster on loopback; the node a client publishes to and consumes from
// (the raft leader or a follower, whichever accepted first) is killed with
// SIGKILL mid-publish. Every message it confirmed is on the other nodes
// exactly once, and the deliveries it held unacknowledged come back, once
// the leader's scanner finds it dead (-dead-after), redelivered.
func TestClusterProcessesSurviveKill9(t *testing.T) {
	procs, amqpAddrs := startClusterProcesses(t, "-dead-after", "1s")

	conn, victim := dialAny(t, amqpAddrs, "")
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("jobs", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))

	var mu sync.Mutex
	confirmed := map[string]bool{}
	enough := make(chan struct{})
	done := make(chan struct{})
	go func() { // one publish at a time, so a confirm names its message
		defer close(done)
		for i := 0; ; i++ {
			body := fmt.Sprintf("m-%d", i)
			if ch.PublishWithContext(context.Background(), "", "jobs", false, false,
				amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent}) != nil {
				return
			}
			c, ok := <-confirms
			if !ok || !c.Ack {
				return
			}
			mu.Lock()
			confirmed[body] = true
			if len(confirmed) == 100 {
				close(enough)
			}
			mu.Unlock()
		}
	}()
	<-enough
	// Five deliveries out on the victim, never acknowledged.
	cch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, cch.Qos(5, 0, false))
	msgs, err := cch.Consume("jobs", "", false, false, false, false, nil)
	require.NoError(t, err)
	held := map[string]bool{}
	for range 5 {
		d := <-msgs
		held[string(d.Body)] = true
	}
	for i, a := range amqpAddrs {
		if a == victim {
			require.NoError(t, procs[i].Process.Kill()) // SIGKILL, mid-publish
		}
	}
	<-done // the connection died with the process

	conn2, _ := dialAny(t, amqpAddrs, victim)
	defer conn2.Close()
	ch2, err := conn2.Channel()
	require.NoError(t, err)
	seen := map[string]int{}
	redelivered := map[string]bool{}
	complete := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for body := range confirmed {
			if seen[body] == 0 {
				return false
			}
		}
		for body := range held {
			if seen[body] == 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(60 * time.Second)
	for !complete() && time.Now().Before(deadline) {
		d, ok, err := ch2.Get("jobs", true)
		require.NoError(t, err)
		if !ok {
			time.Sleep(20 * time.Millisecond) // the scanner has not returned the victim's deliveries yet
			continue
		}
		seen[string(d.Body)]++
		if d.Redelivered {
			redelivered[string(d.Body)] = true
		}
	}
	for body := range held {
		require.True(t, redelivered[body], "%s was out on the killed node: redelivered", body)
	}
	mu.Lock()
	defer mu.Unlock()
	for body := range confirmed {
		require.Equal(t, 1, seen[body], "confirmed %s survives its node's kill -9 exactly once", body)
	}
	for body, n := range seen {
		require.Equal(t, 1, n, "%s once", body)
	}
	t.Logf("confirmed %d before the kill, found %d on another node", len(confirmed), len(seen))
}

// startClusterProcesses builds the server and starts three of it as a
// cluster on loopback, each with its own data directory, the cluster's
// secret (-cluster-secret-file) and extra flags, killed at cleanup.
// It returns the processes and their AMQP addresses.
func startClusterProcesses(t *testing.T, extra ...string) ([]*exec.Cmd, []string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "warren-server")
	out, err := exec.Command(goBin, "build", "-o", bin, "../../cmd/warren").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	raftAddrs, amqpAddrs := freeAddrs(t, 3), freeAddrs(t, 3)
	var peers []string
	for i, a := range raftAddrs {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	secret := clusterSecret(t, dir)
	procs := make([]*exec.Cmd, 3)
	for i := range procs {
		args := append([]string{"-node-id", fmt.Sprint(i + 1), "-peers", strings.Join(peers, ","),
			"-addr", amqpAddrs[i], "-data", filepath.Join(dir, fmt.Sprint(i+1))}, extra...)
		args = append(args, secret...)
		cmd := exec.Command(bin, args...)
		require.NoError(t, cmd.Start())
		procs[i] = cmd
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	return procs, amqpAddrs
}
