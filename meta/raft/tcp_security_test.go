package raft_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/measure"
	"github.com/warrenmq/broker/meta/raft"
	"github.com/warrenmq/broker/storage"
)

// tcpCluster is a group of nodes over loopback TCP, node i with raft id
// i+1, each transport configured by its test.
type tcpCluster struct {
	peers []raft.Peer
	nodes []*raft.Node
	trs   []*raft.TCPTransport
}

// newTCPCluster starts size nodes whose transports mk configures (ID and
// Listener are set; each node logs to the transport's Logger), makes node
// 1 campaign and waits until node 1 leads. Cleanup stops them.
func newTCPCluster(t *testing.T, size int, mk func(i int) raft.TCPConfig) *tcpCluster {
	t.Helper()
	ctx := testCtx(t)
	c := &tcpCluster{peers: make([]raft.Peer, size), nodes: make([]*raft.Node, size), trs: make([]*raft.TCPTransport, size)}
	lns := make([]net.Listener, size)
	for i := range size {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns[i] = l
		c.peers[i] = raft.Peer{ID: uint64(i + 1), RaftAddr: l.Addr().String()}
	}
	root := t.TempDir()
	for i := range size {
		cfg := mk(i)
		cfg.ID, cfg.Listener = uint64(i+1), lns[i]
		tr, err := raft.NewTCPTransport(cfg)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, tr.Close()) })
		n, err := raft.Start(raft.Config{
			ID: uint64(i + 1), Dir: filepath.Join(root, fmt.Sprint(i+1)), Peers: c.peers, Transport: tr,
			TickInterval: 25 * time.Millisecond, ElectionTicks: 40, HeartbeatTicks: 2, Logger: cfg.Logger,
		})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, n.Stop()) })
		c.nodes[i], c.trs[i] = n, tr
	}
	require.NoError(t, c.nodes[0].Campaign(ctx))
	require.Eventually(t, func() bool { return c.nodes[0].IsLeader() }, 30*time.Second, 5*time.Millisecond)
	for _, n := range c.nodes {
		_, err := n.WaitLeader(ctx)
		require.NoError(t, err)
	}
	return c
}

// healthy checks that a write through every member commits and that
// every member's term is a real one and the leader's unchanged.
func (c *tcpCluster) healthy(t *testing.T, leader uint64, term uint64) {
	t.Helper()
	ctx := testCtx(t)
	for i, n := range c.nodes {
		_, err := n.Shards().Append(ctx, "q", []storage.Record{{Body: []byte(fmt.Sprint("after ", i))}})
		require.NoError(t, err, "a write through member %d", i+1)
	}
	for i, n := range c.nodes {
		st := n.ReplicationStatus()
		require.Equal(t, leader, st.Leader, "member %d's leader", i+1)
		require.Equal(t, term, st.Term, "member %d's term", i+1)
	}
}

// wrappingPacket is the 21 bytes that stopped a cluster for good: a frame
// holding a heartbeat with term 2^64-1 from a member that does not exist.
func wrappingPacket(to uint64) []byte {
	b, err := proto.Marshal(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(to), From: proto.Uint64(9), Term: proto.Uint64(math.MaxUint64)})
	if err != nil {
		panic(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// rawSend connects to addr, writes b and returns the connection.
func rawSend(t *testing.T, addr string, b []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Write(b)
	require.NoError(t, err)
	return c
}

// insecureHello is the handshake of a dialer without a secret, from
// member from to member to; the member answers with 81 bytes.
func insecureHello(from, to uint64) []byte {
	b := append([]byte("WRNR"), 1, 1, 0, 0)
	b = binary.BigEndian.AppendUint64(b, from)
	b = binary.BigEndian.AppendUint64(b, to)
	return append(b, make([]byte, 32)...)
}

// TestRawPacketCannotStopCluster sends every member of a three-node
// cluster, from a raw TCP client, the 21-byte packet with term 2^64-1
// that made etcd raft panic on all three (and again at every restart),
// and opens 8 connections per member announcing a 1 GiB frame: the
// members close them all, without reading a message or allocating what
// was announced, and the cluster serves on, with the same leader and term.
func TestRawPacketCannotStopCluster(t *testing.T) {
	c := newTCPCluster(t, 3, func(int) raft.TCPConfig {
		return raft.TCPConfig{Secret: testSecret, HandshakeTimeout: time.Second}
	})
	st := c.nodes[0].ReplicationStatus()
	var conns []net.Conn
	for _, p := range c.peers {
		pkt := wrappingPacket(p.ID)
		require.Len(t, pkt, 21)
		conns = append(conns, rawSend(t, p.RaftAddr, pkt))
		for range 8 {
			conns = append(conns, rawSend(t, p.RaftAddr, append([]byte{0x40, 0, 0, 0}, bytes.Repeat([]byte{1}, 1024)...)))
		}
	}
	for _, conn := range conns {
		amqptest.WaitClosed(t, conn)
	}
	c.healthy(t, st.Leader, st.Term)
}

// TestOversizedFrameBoundedByArrival opens, on a member without
// authentication (the one kind that reads an outsider's frames), 8
// connections that announce a frame of 1 GiB (the limit) and send 1 MiB
// of it: the member holds about what arrived, not what was announced.
func TestOversizedFrameBoundedByArrival(t *testing.T) {
	c := newTCPCluster(t, 3, func(int) raft.TCPConfig {
		return raft.TCPConfig{Insecure: true, Logger: slog.New(slog.DiscardHandler)}
	})
	before := measure.LiveHeap()
	for range 8 {
		conn := rawSend(t, c.peers[0].RaftAddr, insecureHello(2, 1))
		_, err := io.ReadFull(conn, make([]byte, 81))
		require.NoError(t, err)
		_, err = conn.Write(append([]byte{0x40, 0, 0, 0}, make([]byte, 1<<20)...))
		require.NoError(t, err)
	}
	held := measure.LiveHeap() - before
	t.Logf("live heap with 8 connections each 1 MiB into a frame announced as 1 GiB: %+d bytes", held)
	require.Less(t, held, int64(8*4<<20), "about what arrived is held, not 8 GiB")
}

// TestHandshakeRefusals connects to a member with what a member without
// the secret can send, each followed by the 21-byte packet: every one is
// closed, the member's inbox stays empty (nothing was read), and a member
// with the secret is served.
func TestHandshakeRefusals(t *testing.T) {
	serverTLS, clientTLS := testTLS(t)
	otherServer, otherClient := testTLS(t)
	hello := func(auth byte, from, to uint64) []byte {
		b := append([]byte("WRNR"), 1, 1, auth, 0)
		b = binary.BigEndian.AppendUint64(b, from)
		b = binary.BigEndian.AppendUint64(b, to)
		return append(b, make([]byte, 32)...)
	}
	tests := []struct {
		name  string
		cfg   raft.TCPConfig // the member's
		dial  func(t *testing.T, addr string) net.Conn
		other *raft.TCPConfig // a member that must fail to reach it
	}{
		{"no handshake", raft.TCPConfig{Secret: testSecret}, func(t *testing.T, addr string) net.Conn {
			return rawSend(t, addr, wrappingPacket(1))
		}, nil},
		{"a hello without the secret", raft.TCPConfig{Secret: testSecret}, func(t *testing.T, addr string) net.Conn {
			return rawSend(t, addr, append(hello(0, 2, 1), wrappingPacket(1)...))
		}, nil},
		{"a hello claiming the secret, a made-up proof", raft.TCPConfig{Secret: testSecret}, func(t *testing.T, addr string) net.Conn {
			c := rawSend(t, addr, hello(1, 2, 1))
			_, err := c.Write(append(bytes.Repeat([]byte{7}, 32), wrappingPacket(1)...))
			require.NoError(t, err)
			return c
		}, nil},
		{"a hello to another member", raft.TCPConfig{Secret: testSecret}, func(t *testing.T, addr string) net.Conn {
			return rawSend(t, addr, append(hello(1, 2, 3), wrappingPacket(1)...))
		}, nil},
		{"another cluster's secret", raft.TCPConfig{Secret: testSecret}, nil, &raft.TCPConfig{Secret: []byte("another cluster's secret, 32 b.")}},
		{"no secret, no TLS", raft.TCPConfig{Secret: testSecret}, nil, &raft.TCPConfig{Insecure: true}},
		{"mutual TLS: another CA's certificate", raft.TCPConfig{ServerTLS: serverTLS, ClientTLS: clientTLS}, nil, &raft.TCPConfig{ServerTLS: otherServer, ClientTLS: otherClient}},
		{"mutual TLS: no client certificate", raft.TCPConfig{ServerTLS: serverTLS, ClientTLS: clientTLS}, func(t *testing.T, addr string) net.Conn {
			return rawSend(t, addr, wrappingPacket(1))
		}, &raft.TCPConfig{Secret: testSecret}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			logs := new(amqptest.SyncBuffer)
			cfg := tt.cfg
			cfg.ID, cfg.Listener, cfg.Peers = 1, l, map[uint64]string{2: "127.0.0.1:1"}
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			tr, err := raft.NewTCPTransport(cfg)
			require.NoError(t, err)
			defer tr.Close()
			if tt.dial != nil {
				amqptest.WaitClosed(t, tt.dial(t, l.Addr().String()))
			}
			if tt.other != nil {
				ol, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				ocfg := *tt.other
				ocfg.ID, ocfg.Listener, ocfg.Peers = 2, ol, map[uint64]string{1: l.Addr().String()}
				ocfg.Logger = slog.New(slog.DiscardHandler)
				other, err := raft.NewTCPTransport(ocfg)
				require.NoError(t, err)
				defer other.Close()
				m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(1), From: proto.Uint64(2), Term: proto.Uint64(1)}
				err = other.Send(testCtx(t), []*raftpb.Message{m})
				t.Log(err)
				require.Error(t, err)
				require.Error(t, other.SendMessages(testCtx(t), []raft.Message{{To: 1, Data: []byte("x")}}))
			}
			require.Eventually(t, func() bool { return tr.Pending() == 0 }, 30*time.Second, 5*time.Millisecond)
			select {
			case m := <-tr.Receive():
				t.Fatalf("a refused connection's message was read: %v", m)
			case m := <-tr.Messages():
				t.Fatalf("a refused connection's Message was read: %v", m)
			default:
			}
			require.Contains(t, logs.String(), "refused a connection that did not authenticate as a member")
		})
	}
}

// TestInsecureOptOut runs a cluster with authentication turned off: every
// member warns that it is, the members work together, and a raw client's
// 21-byte packet, which the transport now reads, is refused before raft's
// Step by the message checks.
func TestInsecureOptOut(t *testing.T) {
	var logs [3]*amqptest.SyncBuffer
	c := newTCPCluster(t, 3, func(i int) raft.TCPConfig {
		logs[i] = new(amqptest.SyncBuffer)
		return raft.TCPConfig{Insecure: true, Logger: slog.New(slog.NewTextHandler(logs[i], nil))}
	})
	for i := range logs {
		require.Contains(t, logs[i].String(), "members are NOT authenticated (TCPConfig.Insecure)", "member %d", i+1)
	}
	st := c.nodes[0].ReplicationStatus()
	for _, p := range c.peers {
		// The insecure handshake names a member; then the packet in
		// that member's name.
		conn := rawSend(t, p.RaftAddr, insecureHello(1+p.ID%3, p.ID))
		reply := make([]byte, 81)
		_, err := io.ReadFull(conn, reply)
		require.NoError(t, err)
		require.Equal(t, byte(0), reply[80], "accepted")
		m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(p.ID), From: proto.Uint64(1 + p.ID%3), Term: proto.Uint64(math.MaxUint64)}
		mb, err := proto.Marshal(m)
		require.NoError(t, err)
		_, err = conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(mb))), mb...))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for i := range logs {
			if !bytes.Contains([]byte(logs[i].String()), []byte("raft: refused a message")) {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "every member refused the packet")
	c.healthy(t, st.Leader, st.Term)
}

// TestSpoofedHeartbeatsDoNotChurnLeader floods the leader, from 8 raw TCP
// clients, with heartbeats a term ahead in a follower's name, while the
// members write: the leader stays leader in the same term and every write
// commits.
func TestSpoofedHeartbeatsDoNotChurnLeader(t *testing.T) {
	c := newTCPCluster(t, 3, func(int) raft.TCPConfig {
		return raft.TCPConfig{Secret: testSecret, Logger: slog.New(slog.DiscardHandler)}
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	st := c.nodes[0].ReplicationStatus()
	m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(1), From: proto.Uint64(2), Term: proto.Uint64(st.Term + 1)}
	mb, err := proto.Marshal(m)
	require.NoError(t, err)
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(mb))), mb...)
	storm := bytes.Repeat(frame, 1000)
	var wg sync.WaitGroup
	var sent atomic.Int64
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				conn, err := net.Dial("tcp", c.peers[0].RaftAddr)
				if err != nil {
					continue
				}
				n, _ := conn.Write(storm)
				conn.Close()
				sent.Add(int64(n / len(frame)))
			}
		})
	}
	for i := range 20 {
		_, err := c.nodes[i%3].Shards().Append(ctx, "q", []storage.Record{{Body: []byte(fmt.Sprint(i))}})
		require.NoError(t, err, "write %d during the storm", i)
	}
	cancel()
	wg.Wait()
	total := sent.Load()
	t.Logf("%d spoofed heartbeats written at the leader during 20 writes", total)
	require.Positive(t, total)
	require.True(t, c.nodes[0].IsLeader())
	c.healthy(t, st.Leader, st.Term)
}

// TestUnauthenticatedSocketsBounded opens 200 sockets to a member that
// never say anything: at most MaxHandshakes of them are held (the oldest
// are closed as new ones come), the rest are closed, and the members
// still connect to each other and commit.
func TestUnauthenticatedSocketsBounded(t *testing.T) {
	const limit = 16
	c := newTCPCluster(t, 3, func(int) raft.TCPConfig {
		return raft.TCPConfig{Secret: testSecret, MaxHandshakes: limit, HandshakeTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)}
	})
	st := c.nodes[0].ReplicationStatus()
	var conns []net.Conn
	for range 200 {
		conn, err := net.Dial("tcp", c.peers[0].RaftAddr)
		require.NoError(t, err)
		defer conn.Close()
		conns = append(conns, conn)
	}
	require.Eventually(t, func() bool { return c.trs[0].Pending() == limit }, 30*time.Second, 5*time.Millisecond)
	for _, conn := range conns[:200-limit] {
		amqptest.WaitClosed(t, conn)
	}
	// The members' own connections get through: the followers drop
	// theirs to the leader and dial again.
	for _, tr := range c.trs[1:] {
		tr.SetPeer(1, "127.0.0.1:1")
		tr.SetPeer(1, c.peers[0].RaftAddr)
	}
	c.healthy(t, st.Leader, st.Term)
	require.LessOrEqual(t, c.trs[0].Pending(), limit)
}

// TestRemovedMemberRefused: once a member is removed (RemovePeer, as a
// Node does when the removal commits), its connections are closed and it
// cannot connect again.
func TestRemovedMemberRefused(t *testing.T) {
	var lns [2]net.Listener
	for i := range lns {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns[i] = l
	}
	var trs [2]*raft.TCPTransport
	for i := range trs {
		tr, err := raft.NewTCPTransport(raft.TCPConfig{ID: uint64(i + 1), Listener: lns[i], Secret: testSecret,
			Peers: map[uint64]string{uint64(2 - i): lns[1-i].Addr().String()}, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		trs[i] = tr
		defer tr.Close()
	}
	ctx := testCtx(t)
	m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(1), From: proto.Uint64(2), Term: proto.Uint64(1)}
	require.NoError(t, trs[1].Send(ctx, []*raftpb.Message{m}))
	amqptest.Receive(t, trs[0].Receive())

	trs[0].RemovePeer(2)
	var err error
	require.Eventually(t, func() bool {
		err = trs[1].Send(ctx, []*raftpb.Message{m})
		return err != nil && strings.Contains(err.Error(), "does not know member 2")
	}, 30*time.Second, 20*time.Millisecond, "last error: %v", err)
	select {
	case got := <-trs[0].Receive():
		require.Failf(t, "a removed member's message was read", "%v", got)
	default:
	}
}
