package raft_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/testcert"
	"github.com/warrenmq/broker/meta/raft"
	"github.com/warrenmq/broker/storage"
)

// testTLS returns server and client configs with certificates from one
// test CA, which every node trusts both ways (mutual TLS).
func testTLS(t *testing.T) (server, client *tls.Config) {
	ca := testcert.NewCA(t, "warren raft test CA")
	server = &tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, "127.0.0.1", true).TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool, MinVersion: tls.VersionTLS13,
	}
	client = &tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, "raft peer", false).TLS},
		RootCAs:      ca.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
	}
	return server, client
}

// TestTCPCluster runs three nodes over loopback TCP (plain and TLS):
// replication through a follower, and a node that restarts on the same
// address catches up over fresh connections.
func TestTCPCluster(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", withTLS), func(t *testing.T) {
			ctx := testCtx(t)
			var serverTLS, clientTLS *tls.Config
			if withTLS {
				serverTLS, clientTLS = testTLS(t)
			}
			const size = 3
			root := t.TempDir()
			lns := make([]net.Listener, size)
			peers := make([]raft.Peer, size)
			for i := range size {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				lns[i] = l
				peers[i] = raft.Peer{ID: uint64(i + 1), RaftAddr: l.Addr().String(), AMQPAddr: fmt.Sprintf("amqp-%d", i+1)}
			}
			nodes := make([]*raft.Node, size)
			trs := make([]*raft.TCPTransport, size)
			start := func(i int, l net.Listener) {
				tr, err := raft.NewTCPTransport(raft.TCPConfig{ID: uint64(i + 1), Listener: l, ServerTLS: serverTLS, ClientTLS: clientTLS})
				require.NoError(t, err)
				n, err := raft.Start(raft.Config{
					ID: uint64(i + 1), Dir: filepath.Join(root, fmt.Sprint(i+1)), Peers: peers, Transport: tr,
					TickInterval: 25 * time.Millisecond, ElectionTicks: 40, HeartbeatTicks: 2, SnapshotEvery: 16,
				})
				if err != nil {
					require.NoError(t, tr.Close())
				}
				require.NoError(t, err)
				nodes[i], trs[i] = n, tr
			}
			stop := func(i int) {
				if nodes[i] != nil {
					require.NoError(t, nodes[i].Stop())
					require.NoError(t, trs[i].Close())
					nodes[i], trs[i] = nil, nil
				}
			}
			t.Cleanup(func() {
				for i := range size {
					stop(i)
				}
			})
			for i := range size {
				start(i, lns[i])
			}
			require.NoError(t, nodes[0].Campaign(ctx))
			_, err := nodes[2].WaitLeader(ctx)
			require.NoError(t, err)

			appendVia := func(n *raft.Node, body string) {
				_, err := n.Shards().Append(ctx, "q", []storage.Record{{Body: []byte(body), Persistent: true}})
				require.NoError(t, err)
			}
			for i := range 10 {
				appendVia(nodes[i%size], fmt.Sprint(i))
			}
			for _, n := range nodes {
				require.Len(t, readAll(ctx, t, n.Shards(), "q"), 10)
			}
			got, err := nodes[1].Peers(ctx)
			require.NoError(t, err)
			require.Equal(t, peers, got)

			stop(2)
			for i := range 40 {
				appendVia(nodes[i%2], fmt.Sprint(10+i))
			}
			l, err := net.Listen("tcp", peers[2].RaftAddr)
			require.NoError(t, err)
			start(2, l)
			require.Len(t, readAll(ctx, t, nodes[2].Shards(), "q"), 50)
		})
	}
}

func TestTCPTransportRejectsBadConfig(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	tests := []struct {
		name string
		cfg  raft.TCPConfig
	}{
		{"no-listener", raft.TCPConfig{ID: 1}},
		{"no-id", raft.TCPConfig{Listener: l}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := raft.NewTCPTransport(tt.cfg)
			require.ErrorContains(t, err, "raft: ")
		})
	}
}

// TestTCPTransportDropsOversizedFrame checks that a peer announcing a frame
// over the limit is disconnected without the transport allocating it.
func TestTCPTransportDropsOversizedFrame(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tr, err := raft.NewTCPTransport(raft.TCPConfig{ID: 1, Listener: l, MaxMessageBytes: 1024})
	require.NoError(t, err)
	defer tr.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte{0xff, 0xff, 0xff, 0xff})
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the transport must close the connection")
}

// TestTCPPeerThatDoesNotRead runs two nodes over TCP with a third member
// whose process accepts connections and never reads them, as a stopped
// (SIGSTOP) process does: writes go on between the two, the leader's queue
// to the silent member stays within its bound, and the nodes stop while
// their senders to it are blocked in a write.
func TestTCPPeerThatDoesNotRead(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	var lns [3]net.Listener
	peers := make([]raft.Peer, 3)
	for i := range lns {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns[i] = l
		peers[i] = raft.Peer{ID: uint64(i + 1), RaftAddr: l.Addr().String()}
	}
	// The stopped member: its kernel accepts, nobody reads.
	var held []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := lns[2].Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		lns[2].Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	}()
	nodes := make([]*raft.Node, 2)
	for i := range nodes {
		tr, err := raft.NewTCPTransport(raft.TCPConfig{ID: uint64(i + 1), Listener: lns[i]})
		require.NoError(t, err)
		defer tr.Close()
		n, err := raft.Start(raft.Config{
			ID: uint64(i + 1), Dir: filepath.Join(root, fmt.Sprint(i+1)), Peers: peers, Transport: tr,
			TickInterval: 25 * time.Millisecond, ElectionTicks: 40, HeartbeatTicks: 2,
		})
		require.NoError(t, err)
		nodes[i] = n
		defer func() { require.NoError(t, n.Stop()) }()
	}
	require.NoError(t, nodes[0].Campaign(ctx))
	body := make([]byte, 16<<10)
	for i := range 1000 {
		_, err := nodes[i%2].Shards().Append(ctx, "q", []storage.Record{{Body: body}})
		require.NoError(t, err)
	}
	lead := nodes[0]
	if nodes[1].IsLeader() {
		lead = nodes[1]
	}
	high, drops := lead.QueueStats(3)
	t.Logf("16 MiB written past a member that does not read: leader's queue to it high %d bytes, %d dropped", high, drops)
	require.LessOrEqual(t, high, raft.MaxQueueBytes+1024*64)
	require.Positive(t, high)
}
