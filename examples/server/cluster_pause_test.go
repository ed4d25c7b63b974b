//go:build unix

package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestClusterProcessesSurviveSIGSTOP: three server processes form a
// cluster on loopback; a client publishes persistent messages with
// confirms to one of them while each of the other two in turn is stopped
// with SIGSTOP for longer than an election and its pause, then resumed
// with SIGCONT (one of them is usually the raft leader). The publisher
// keeps being confirmed, and each resumed member serves AMQP again. The
// slowest confirm and how long each member took to serve again are
// reported; only a stall of many seconds fails the test.
func TestClusterProcessesSurviveSIGSTOP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "warren-server")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	raftAddrs, amqpAddrs := freeAddrs(t, 3), freeAddrs(t, 3)
	var peers []string
	for i, a := range raftAddrs {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	procs := make([]*exec.Cmd, 3)
	for i := range procs {
		cmd := exec.Command(bin, "-node-id", fmt.Sprint(i+1), "-peers", strings.Join(peers, ","),
			"-addr", amqpAddrs[i], "-data", filepath.Join(dir, fmt.Sprint(i+1)))
		require.NoError(t, cmd.Start())
		procs[i] = cmd
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}

	conn, home := dialAny(t, amqpAddrs, "")
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("jobs", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))

	var (
		mu        sync.Mutex
		worst     time.Duration
		confirmed int
		nacked    int
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // one publish at a time: a confirm's wait is its latency
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			if ch.PublishWithContext(context.Background(), "", "jobs", false, false,
				amqp091.Publishing{Body: fmt.Appendf(nil, "m-%d", i), DeliveryMode: amqp091.Persistent}) != nil {
				return
			}
			c, ok := <-confirms
			if !ok {
				return
			}
			mu.Lock()
			worst = max(worst, time.Since(start))
			if c.Ack {
				confirmed++
			} else {
				nacked++ // the leader changed under it: outcome unknown
			}
			mu.Unlock()
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()

	const pause = 5 * time.Second // past the election timeout (1 s) and the pause (3 s)
	for i, a := range amqpAddrs {
		if a == home {
			continue
		}
		require.NoError(t, procs[i].Process.Signal(syscall.SIGSTOP))
		time.Sleep(pause)
		require.NoError(t, procs[i].Process.Signal(syscall.SIGCONT))
		resumed := time.Now()
		var back *amqp091.Connection
		for deadline := time.Now().Add(60 * time.Second); back == nil && time.Now().Before(deadline); {
			back, err = amqp091.DialConfig("amqp://guest:guest@"+a+"/", amqp091.Config{Dial: amqp091.DefaultDial(2 * time.Second)})
			if err != nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
		require.NotNil(t, back, "member %d does not serve AMQP after SIGCONT", i+1)
		publishOne(t, back, "jobs", fmt.Sprint("after-resume-", i+1))
		t.Logf("member %d stopped %v: served and confirmed again %v after SIGCONT", i+1, pause, time.Since(resumed).Round(time.Millisecond))
		back.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("publisher on %s: %d confirmed, %d nacked, slowest confirm %v", home, confirmed, nacked, worst.Round(time.Millisecond))
	require.Positive(t, confirmed)
	require.Less(t, worst, 15*time.Second, "the publisher's confirms stalled")
}
