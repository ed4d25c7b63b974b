package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/testcert"
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

// publishOne declares durable queue and publishes body to it, persistent,
// waiting for its confirm.
func publishOne(t *testing.T, conn *amqp091.Connection, queue, body string) {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	require.NoError(t, ch.PublishWithContext(context.Background(), "", queue, false, false,
		amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent}))
	require.True(t, (<-confirms).Ack)
}

// clusterSecret writes a cluster secret into dir and returns the
// -cluster-secret-file flag that gives it to a member.
func clusterSecret(t *testing.T, dir string) []string {
	return []string{"-cluster-secret-file", writeFile(t, dir, "cluster-secret", []byte("the cluster's secret, given to every member\n"))}
}

// startCluster runs three servers as a raft cluster over loopback TCP
// through run, each with its -node-id, -peers, -addr and -data plus
// extra(i), and returns their AMQP addresses and a func that stops one.
// The members share a cluster secret (-cluster-secret-file) unless extra
// makes them use mutual TLS.
func startCluster(t *testing.T, extra func(i int) []string) ([]string, func(i int)) {
	raftAddrs, amqpAddrs := freeAddrs(t, 3), freeAddrs(t, 3)
	var peers []string
	for i, a := range raftAddrs {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	dir := t.TempDir()
	secret := clusterSecret(t, dir)
	stops := make([]context.CancelFunc, 3)
	dones := make([]chan error, 3)
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		stops[i], dones[i] = cancel, make(chan error, 1)
		args := []string{"-node-id", fmt.Sprint(i + 1), "-peers", strings.Join(peers, ","),
			"-addr", amqpAddrs[i], "-data", filepath.Join(dir, fmt.Sprint(i+1))}
		if extra != nil {
			args = append(args, extra(i)...)
		}
		if !slices.Contains(args, "-raft-tls-cert") {
			args = append(args, secret...)
		}
		logs := new(amqptest.SyncBuffer)
		go func() { dones[i] <- run(ctx, args, logs, logs) }()
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("node %d's log:\n%s", i+1, logs)
			}
		})
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
	return amqpAddrs, stop
}

// TestClusterFlags runs three servers as a raft cluster over loopback TCP
// (-node-id, -peers): a confirmed persistent message published to one node
// is there, on another node, after the first one shuts down.
func TestClusterFlags(t *testing.T) {
	amqpAddrs, stop := startCluster(t, nil)
	conn, first := dialAny(t, amqpAddrs, "")
	publishOne(t, conn, "jobs", "kept")

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

// TestClusterTLSAndManagement: members talk mutual TLS (-raft-tls-*), each
// serves the management API of its own broker (-http) and AMQPS
// (-tls-listen); a message published on one node is read on another.
func TestClusterTLSAndManagement(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "cluster CA")
	caFile := writeFile(t, dir, "ca.pem", ca.PEM)
	httpAddrs, tlsAddrs := freeAddrs(t, 3), freeAddrs(t, 3)
	amqpAddrs, _ := startCluster(t, func(i int) []string {
		leaf := ca.Issue(t, "127.0.0.1", true)
		cert := writeFile(t, dir, fmt.Sprintf("m%d.pem", i), leaf.CertPEM)
		key := writeFile(t, dir, fmt.Sprintf("m%d.key", i), leaf.KeyPEM)
		return []string{
			"-raft-tls-cert", cert, "-raft-tls-key", key, "-raft-tls-ca", caFile,
			"-tls-listen", tlsAddrs[i], "-tls-cert", cert, "-tls-key", key,
			"-http", httpAddrs[i], "-dead-after", "2s",
		}
	})
	conn, first := dialAny(t, amqpAddrs, "")
	defer conn.Close()
	publishOne(t, conn, "jobs", "over tls")

	// Read it over AMQPS from another node.
	var conn2 *amqp091.Connection
	for i, a := range amqpAddrs {
		if a != first {
			require.Eventually(t, func() bool { // the node may still be starting its broker
				var err error
				conn2, err = amqp091.DialTLS("amqps://guest:guest@"+tlsAddrs[i]+"/", &tls.Config{RootCAs: ca.Pool})
				return err == nil
			}, 30*time.Second, 20*time.Millisecond)
			break
		}
	}
	defer conn2.Close()
	ch2, err := conn2.Channel()
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the other node learns the queue from the log
		d, ok, err := ch2.Get("jobs", true)
		if err != nil {
			ch2, err = conn2.Channel() // a 404 closed the channel
			require.NoError(t, err)
			return false
		}
		return ok && string(d.Body) == "over tls"
	}, 30*time.Second, 20*time.Millisecond)

	// Direct reply-to across members, over the mutual-TLS raft
	// transport: the requester on the first node, the responder on
	// another, replying there.
	rq, err := conn.Channel()
	require.NoError(t, err)
	_, err = rq.QueueDeclare("rpc", true, false, false, false, nil)
	require.NoError(t, err)
	replies, err := rq.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	require.NoError(t, err)
	var rs *amqp091.Channel
	var requests <-chan amqp091.Delivery
	require.Eventually(t, func() bool { // the other node learns the queue from the log
		if rs, err = conn2.Channel(); err != nil {
			return false
		}
		requests, err = rs.Consume("rpc", "", true, false, false, false, nil)
		return err == nil // a 404 closed rs
	}, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, rq.PublishWithContext(t.Context(), "", "rpc", false, false,
		amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: "c1", Body: []byte("ping")}))
	req := amqptest.Next(t, requests)
	require.NoError(t, rs.PublishWithContext(t.Context(), "", req.ReplyTo, true, false,
		amqp091.Publishing{CorrelationId: req.CorrelationId, Body: []byte("pong")}))
	reply := amqptest.Next(t, replies)
	require.Equal(t, "c1", reply.CorrelationId)
	require.Equal(t, "pong", string(reply.Body))

	// Each request has its own timeout, so one that hangs (a node
	// between brokers, its raft catching up) does not use up the wait,
	// and a failure says what the node last answered.
	client := &http.Client{Timeout: 3 * time.Second}
	for i, a := range httpAddrs {
		var last string
		deadline := time.Now().Add(45 * time.Second)
		for {
			req, err := http.NewRequest(http.MethodGet, "http://"+a+"/api/nodes", nil)
			require.NoError(t, err)
			req.SetBasicAuth("guest", "guest")
			resp, err := client.Do(req)
			if err != nil {
				last = err.Error()
			} else {
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(body), fmt.Sprintf(`"warren@%d"`, i+1)) {
					break
				}
				last = fmt.Sprintf("%d %s (read error %v)", resp.StatusCode, body, err)
			}
			require.True(t, time.Now().Before(deadline), "node %d's management API never named it; last answer: %s", i+1, last)
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestClusterSecret runs a one-member cluster without a secret given: its
// first start generates one in -data (owner only, logged), its restart
// reads the same one, and once the file is gone the member, whose data
// directory holds raft state, refuses to start rather than make up
// another. With -raft-insecure it serves and warns that members are not
// authenticated.
func TestClusterSecret(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "1")
	serve := func(extra ...string) string {
		raftAddr, amqpAddr := freeAddrs(t, 1)[0], freeAddrs(t, 1)[0]
		args := append([]string{"-node-id", "1", "-peers", "1=" + raftAddr, "-addr", amqpAddr, "-data", data}, extra...)
		ctx, cancel := context.WithCancel(context.Background())
		logs := new(amqptest.SyncBuffer)
		done := make(chan error, 1)
		go func() { done <- run(ctx, args, logs, logs) }()
		conn, _ := dialAny(t, []string{amqpAddr}, "")
		conn.Close()
		cancel()
		require.NoError(t, <-done)
		return logs.String()
	}
	logs := serve()
	require.Contains(t, logs, "generated a new cluster secret")
	file := filepath.Join(data, "cluster-secret")
	secret, err := os.ReadFile(file)
	require.NoError(t, err)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	logs = serve()
	require.NotContains(t, logs, "generated")
	again, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, secret, again)

	require.NoError(t, os.Remove(file))
	err = run(context.Background(), []string{"-node-id", "1", "-peers", "1=127.0.0.1:0", "-data", data}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "no cluster secret")
	require.ErrorContains(t, err, "-cluster-secret-file")

	logs = serve("-raft-insecure")
	require.Contains(t, logs, "members are NOT authenticated")
}

func TestClusterFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-node-id", "1"}, "-node-id and -peers go together"},
		{[]string{"-peers", "1=127.0.0.1:1"}, "-node-id and -peers go together"},
		{[]string{"-node-id", "1", "-peers", "1=127.0.0.1:1", "-memory"}, "does not take"},
		{[]string{"-dead-after", "1s"}, "are for cluster nodes"},
		{[]string{"-raft-tls-cert", "x.pem"}, "are for cluster nodes"},
		{[]string{"-node-id", "1", "-peers", "1=127.0.0.1:1", "-raft-tls-cert", "x.pem"}, "go together"},
		{[]string{"-node-id", "1", "-peers", "1=127.0.0.1:1", "-addr", ""}, "nothing to listen on"},
		{[]string{"-node-id", "1", "-peers", "x=127.0.0.1:1"}, "is not id=host:port"},
		{[]string{"-node-id", "4", "-peers", "1=127.0.0.1:1"}, "no entry for -node-id 4"},
		{[]string{"-cluster-secret-file", "secret"}, "are for cluster nodes"},
		{[]string{"-raft-insecure"}, "are for cluster nodes"},
		{[]string{"-node-id", "1", "-peers", "1=127.0.0.1:0", "-raft-insecure", "-cluster-secret-file", "secret"}, "excludes -cluster-secret-file"},
		{[]string{"-node-id", "1", "-peers", "1=127.0.0.1:0", "-data", t.TempDir(), "-cluster-secret-file", filepath.Join(t.TempDir(), "none")},
			"read cluster secret"},
	} {
		err := run(context.Background(), tc.args, io.Discard, io.Discard)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}
