package raft_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/measure"
	"github.com/warrenmq/broker/internal/testcert"
	"github.com/warrenmq/broker/meta/raft"
	"github.com/warrenmq/broker/storage"
)

// testTLS returns server and client configs with certificates from one
// test CA, which every node trusts both ways (mutual TLS).
func testTLS(t testing.TB) (server, client *tls.Config) {
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

// testSecret is the cluster secret of the tests' TCP members.
var testSecret = []byte("warren raft test cluster secret")

// TestTCPCluster runs three nodes over loopback TCP (cluster secret and
// mutual TLS):
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
				cfg := raft.TCPConfig{ID: uint64(i + 1), Listener: l, ServerTLS: serverTLS, ClientTLS: clientTLS}
				if !withTLS {
					cfg.Secret = testSecret
				}
				tr, err := raft.NewTCPTransport(cfg)
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
	server, client := testTLS(t)
	oneWay := server.Clone()
	oneWay.ClientAuth = tls.NoClientCert
	tests := []struct {
		name string
		cfg  raft.TCPConfig
		want string
	}{
		{"no-listener", raft.TCPConfig{ID: 1, Secret: testSecret}, "Listener is required"},
		{"no-id", raft.TCPConfig{Listener: l, Secret: testSecret}, "ID must not be 0"},
		{"no authentication", raft.TCPConfig{ID: 1, Listener: l}, "needs Secret (the cluster secret) or mutual TLS"},
		{"TLS without client certificates", raft.TCPConfig{ID: 1, Listener: l, ServerTLS: oneWay, ClientTLS: client}, "needs Secret"},
		{"TLS on one side", raft.TCPConfig{ID: 1, Listener: l, ServerTLS: server}, "needs Secret"},
		{"a short secret", raft.TCPConfig{ID: 1, Listener: l, Secret: []byte("short")}, "fewer than 16"},
		{"insecure and a secret", raft.TCPConfig{ID: 1, Listener: l, Secret: testSecret, Insecure: true}, "excludes Secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := raft.NewTCPTransport(tt.cfg)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestTCPTransportDropsOversizedFrame checks that a member announcing a
// frame over the limit is disconnected without the transport allocating
// it (on a transport without authentication, which reads what a raw
// client sends after the handshake).
func TestTCPTransportDropsOversizedFrame(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tr, err := raft.NewTCPTransport(raft.TCPConfig{ID: 1, Listener: l, MaxMessageBytes: 1024, Insecure: true,
		Peers: map[uint64]string{2: "127.0.0.1:1"}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer tr.Close()
	c := rawSend(t, l.Addr().String(), insecureHello(2, 1))
	reply := make([]byte, 81)
	_, err = io.ReadFull(c, reply)
	require.NoError(t, err)
	require.Equal(t, byte(0), reply[80], "accepted")
	_, err = c.Write([]byte{0xff, 0xff, 0xff, 0xff})
	require.NoError(t, err)
	amqptest.WaitClosed(t, c)
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
		tr, err := raft.NewTCPTransport(raft.TCPConfig{ID: uint64(i + 1), Listener: lns[i], Secret: testSecret})
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

// BenchmarkTCPTransport sends raft appends (16 to a Send, each with one
// entry of 4 KiB) from one transport to another over loopback, with the
// cluster secret (sealed frames), mutual TLS, and no authentication
// (Insecure: the bytes as they went before members authenticated). It
// reports the process's CPU time per message next to ns/op: on a shared
// machine the wall time mostly measures the wait for a core.
func BenchmarkTCPTransport(b *testing.B) {
	serverTLS, clientTLS := testTLS(b)
	for _, mode := range []struct {
		name string
		cfg  raft.TCPConfig
	}{
		{"insecure", raft.TCPConfig{Insecure: true}},
		{"secret", raft.TCPConfig{Secret: testSecret}},
		{"tls", raft.TCPConfig{ServerTLS: serverTLS, ClientTLS: clientTLS}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var trs [2]*raft.TCPTransport
			var lns [2]net.Listener
			for i := range lns {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(b, err)
				lns[i] = l
			}
			for i := range trs {
				cfg := mode.cfg
				cfg.ID, cfg.Listener = uint64(i+1), lns[i]
				cfg.Peers = map[uint64]string{uint64(2 - i): lns[1-i].Addr().String()}
				cfg.Logger = slog.New(slog.DiscardHandler)
				tr, err := raft.NewTCPTransport(cfg)
				require.NoError(b, err)
				trs[i] = tr
				b.Cleanup(func() { tr.Close() })
			}
			const batch = 16
			msgs := make([]*raftpb.Message, batch)
			for i := range msgs {
				msgs[i] = &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: proto.Uint64(2), From: proto.Uint64(1), Term: proto.Uint64(2),
					Index: proto.Uint64(uint64(i)), Entries: []*raftpb.Entry{{Index: proto.Uint64(uint64(i + 1)), Term: proto.Uint64(2), Data: make([]byte, 4<<10)}}}
			}
			ctx := context.Background()
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range b.N * batch {
					<-trs[1].Receive()
				}
			}()
			b.SetBytes(batch * 4 << 10)
			b.ReportAllocs()
			cpu := measure.ProcessCPU()
			b.ResetTimer()
			for range b.N {
				for trs[0].Send(ctx, msgs) != nil { // the first dial may race the listener
				}
			}
			<-done
			b.StopTimer()
			b.ReportMetric(float64(measure.ProcessCPU()-cpu)/float64(b.N*batch), "cpu-ns/msg")
		})
	}
}
