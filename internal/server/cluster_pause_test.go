//go:build unix

package server

import (
	"fmt"
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
// longest gap between confirms (reconnects after a 541 included) and how
// long each member took to serve again are reported; only a stall of many
// seconds fails the test.
func TestClusterProcessesSurviveSIGSTOP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	procs, amqpAddrs := startClusterProcesses(t)

	conn, home := dialAny(t, amqpAddrs, "")
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("jobs", true, false, false, false, nil)
	require.NoError(t, err)
	conn.Close()

	// One publish at a time, so the longest gap between two confirms is
	// the longest stall, reconnects included. A publish whose outcome the
	// member cannot tell (its leader stopped under it) closes the
	// connection with 541 instead of a nack; the publisher then reconnects
	// to the same member and carries on, as a client would.
	pub := &groupPublisher{confirmed: map[string]bool{}}
	pub.watch()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		pub.run(home, []string{"jobs"}, stop)
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
	pub.mu.Lock()
	defer pub.mu.Unlock()
	t.Logf("publisher on %s: %d confirmed, %d nacked, %d reconnects, longest wait for a confirm %v", home, len(pub.confirmed), pub.nacked, pub.reconnects, pub.worst.Round(time.Millisecond))
	require.Positive(t, len(pub.confirmed))
	require.Less(t, pub.worst, 15*time.Second, "the publisher's confirms stalled")
}
