package multiraft

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/raftlink"
)

// encodeOne is f as the bytes after a frame's length.
func encodeOne(t testing.TB, f *frame) []byte {
	b, dropped := appendFrames(nil, f, defaultMaxFrame)
	require.Empty(t, dropped)
	size := binary.BigEndian.Uint32(b)
	require.Equal(t, int(size)+4, len(b), "one frame")
	return b[4:]
}

// badFrames are frames no member sends, from 2 to 1, each with why.
func badFrames(t testing.TB) map[string][]byte {
	u := proto.Uint64
	msg := func(m *raftpb.Message) []byte { return encodeOne(t, &frame{msgs: []groupMsg{{group: 1, msg: m}}}) }
	return map[string][]byte{
		"empty":                  {},
		"unknown type":           {9},
		"a ping with bytes":      {framePing, 0},
		"a count past the bytes": append([]byte{frameMessages}, binary.AppendUvarint(nil, math.MaxUint32)...),
		"a wrapping term":        msg(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: u(2), To: u(1), Term: u(math.MaxUint64)}),
		"another sender":         msg(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: u(3), To: u(1), Term: u(2)}),
		"another member":         msg(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: u(2), To: u(4), Term: u(2)}),
		"a local message":        msg(&raftpb.Message{Type: raftpb.MsgHup.Enum(), From: u(2), To: u(1)}),
		"group 0":                encodeOne(t, &frame{msgs: []groupMsg{{group: 0, msg: &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: u(2), To: u(1), Term: u(2)}}}}),
		"a beat of term 0":       encodeOne(t, &frame{beats: []beat{{group: 1}}}),
		"a beat's bad flags":     encodeOne(t, &frame{beats: []beat{{group: 1, term: 2, flags: 0x80}}}),
		"a beat past the bound":  encodeOne(t, &frame{beats: []beat{{group: 1, term: raftlink.MaxTerm + 1}}}),
		"trailing bytes":         append(encodeOne(t, &frame{beats: []beat{{group: 1, term: 2}}}), 0),
		"undecodable":            append([]byte{frameMessages, 1, 1, 5}, 0xff, 0xff, 0xff, 0xff, 0xff),
	}
}

// TestRefusesBadFrames injects frames no member sends into a running
// cluster: each is refused with an error and dropped, and every group
// still commits.
func TestRefusesBadFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newTestCluster(t, 3, nil)
	c.createGroups(ctx, 3)
	for name, raw := range badFrames(t) {
		require.Error(t, c.net.Inject(2, 1, raw), name)
	}
	require.EqualValues(t, len(badFrames(t)), c.net.Refused())
	// A good one passes.
	require.NoError(t, c.net.Inject(2, 1, encodeOne(t, &frame{})))
	for g := uint64(1); g <= 3; g++ {
		require.NoError(t, c.propose(ctx, 1, g, []byte("still")))
	}
}

// TestTCPRefusesStrangers connects to a member of a running TCP cluster
// as a stranger: another protocol, no secret, a wrong secret, an unknown
// id, and a member that authenticates and then sends a bad frame. Each is
// refused (the connection closed) and the cluster keeps committing.
func TestTCPRefusesStrangers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newTCPCluster(t, 3, nil)
	c.createGroups(ctx, 3)
	addr := c.addrs[3]
	closed := func(conn net.Conn) {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, conn)
		require.NoError(t, err, "the member closed the connection")
		conn.Close()
	}
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		return conn
	}
	// meta/raft's handshake, and an HTTP request: not this protocol.
	for _, first := range [][]byte{[]byte("WRNR\x01\x01\x01\x00"), []byte("GET / HTTP/1.1\r\n\r\n")} {
		conn := dial()
		conn.Write(first)
		closed(conn)
	}
	// Member 1's id with no secret, a wrong one, and an id it does not
	// know with the right one.
	for _, hs := range []raftlink.Handshaker{
		{Proto: &protocol, Self: 1, Rand: rand.Reader},
		{Proto: &protocol, Self: 1, Secret: []byte("another cluster's secret, 32 by"), Rand: rand.Reader},
		{Proto: &protocol, Self: 9, Secret: testSecret, Rand: rand.Reader},
	} {
		conn := dial()
		_, _, err := hs.DialDuplex(conn, bufio.NewReader(conn), kindGroups, 3)
		require.Error(t, err)
		closed(conn)
	}
	for g := uint64(1); g <= 3; g++ {
		require.NoError(t, c.propose(ctx, 3, g, []byte("still")))
	}
	require.GreaterOrEqual(t, c.tcps[3].Refused(), uint64(5))
	require.Zero(t, c.tcps[3].Pending(), "nothing waits to authenticate")
}

// TestTCPClosesOnBadFrame authenticates as member 1 to a lone transport
// and sends a frame no member sends: the connection is closed after the
// good frame before it was delivered.
func TestTCPClosesOnBadFrame(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tr, err := NewTCP(TCPConfig{ID: 2, Listener: l, Peers: map[uint64]string{1: "127.0.0.1:1"}, Secret: testSecret, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer tr.Close()
	conn, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	hs := raftlink.Handshaker{Proto: &protocol, Self: 1, Secret: testSecret, Rand: rand.Reader}
	r, w, err := hs.DialDuplex(conn, bufio.NewReader(conn), kindGroups, 2)
	require.NoError(t, err)
	good, _ := appendFrames(nil, &frame{beats: []beat{{group: 7, term: 3, commit: 1}}}, defaultMaxFrame)
	bad := badFrames(t)["a wrapping term"]
	bw := bufio.NewWriter(w)
	bw.Write(good)
	bw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(bad))))
	bw.Write(bad)
	require.NoError(t, bw.Flush())
	select {
	case in := <-tr.receive():
		require.Equal(t, uint64(1), in.from)
		require.Equal(t, []beat{{group: 7, term: 3, commit: 1}}, in.f.beats)
	case <-time.After(10 * time.Second):
		t.Fatal("the good frame was not delivered")
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.Copy(io.Discard, r)
	require.NoError(t, err, "the member closed the connection")
	require.Eventually(t, func() bool { return tr.Refused() == 1 }, 5*time.Second, 10*time.Millisecond)
	select {
	case in := <-tr.receive():
		t.Fatalf("a frame after the bad one was delivered: %+v", in)
	default:
	}
}
