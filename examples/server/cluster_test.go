package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// freeAddrs returns n loopback addresses that were free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs = append(addrs, l.Addr().String())
		require.NoError(t, l.Close())
	}
	return addrs
}

// dialAny dials the AMQP addresses in turn, skipping skip, until one
// accepts: every member serves AMQP once it knows a raft leader.
func dialAny(t *testing.T, addrs []string, skip string) (*amqp091.Connection, string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, a := range addrs {
			if a == skip {
				continue
			}
			if conn, err := amqp091.Dial("amqp://guest:guest@" + a + "/"); err == nil {
				return conn, a
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no cluster node serves AMQP")
	return nil, ""
}

// TestClusterFlags runs three servers as a raft cluster over loopback TCP
// (-node-id, -peers): a confirmed persistent message published to one node
// is there, on another node, after the first one shuts down.
func TestClusterFlags(t *testing.T) {
	raftAddrs, amqpAddrs := freeAddrs(t, 3), freeAddrs(t, 3)
	var peers []string
	for i, a := range raftAddrs {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	dir := t.TempDir()
	stops := make([]context.CancelFunc, 3)
	dones := make([]chan error, 3)
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		stops[i], dones[i] = cancel, make(chan error, 1)
		args := []string{"-node-id", fmt.Sprint(i + 1), "-peers", strings.Join(peers, ","),
			"-addr", amqpAddrs[i], "-data", filepath.Join(dir, fmt.Sprint(i+1))}
		go func() { dones[i] <- run(ctx, args, io.Discard, io.Discard) }()
	}
	stopped := make([]bool, 3)
	stop := func(i int) {
		if !stopped[i] {
			stopped[i] = true
			stops[i]()
			require.NoError(t, <-dones[i])
		}
	}
	t.Cleanup(func() {
		for i := range 3 {
			stop(i)
		}
	})

	conn, first := dialAny(t, amqpAddrs, "")
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("jobs", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "jobs", false, false,
		amqp091.Publishing{Body: []byte("kept"), DeliveryMode: amqp091.Persistent}))
	require.True(t, (<-confirms).Ack)

	for i, a := range amqpAddrs {
		if a == first {
			stop(i)
		}
	}
	conn.Close()
	conn2, _ := dialAny(t, amqpAddrs, first)
	defer conn2.Close()
	ch2, err := conn2.Channel()
	require.NoError(t, err)
	d, ok, err := ch2.Get("jobs", true)
	require.NoError(t, err)
	require.True(t, ok, "the confirmed message survived its node")
	require.Equal(t, "kept", string(d.Body))
}

func TestClusterFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-node-id", "1"}, "-node-id and -peers go together"},
		{[]string{"-peers", "1=127.0.0.1:1"}, "-node-id and -peers go together"},
		{[]string{"-node-id", "1", "-peers", "1=127.0.0.1:1", "-memory"}, "does not take"},
		{[]string{"-node-id", "1", "-peers", "x=127.0.0.1:1"}, "is not id=host:port"},
		{[]string{"-node-id", "4", "-peers", "1=127.0.0.1:1"}, "no entry for -node-id 4"},
	} {
		err := run(context.Background(), tc.args, io.Discard, io.Discard)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}
