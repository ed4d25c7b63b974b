package multiraft

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// snapMsg is a snapshot message of group data from 2 to 1.
func snapMsg(index uint64, data []byte) *raftpb.Message {
	u := proto.Uint64
	return &raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: u(1), From: u(2), Term: u(3), Snapshot: &raftpb.Snapshot{
		Data: data, Metadata: &raftpb.SnapshotMetadata{Index: u(index), Term: u(3), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}}
}

// chunksOf encodes m of group 9 under a frame limit of max and decodes
// its frames back.
func chunksOf(t testing.TB, m *raftpb.Message, max int) []*snapChunk {
	b, dropped := appendFrames(nil, &frame{msgs: []groupMsg{{group: 9, msg: m}}}, max)
	require.Empty(t, dropped)
	var out []*snapChunk
	for len(b) > 0 {
		size := binary.BigEndian.Uint32(b)
		require.LessOrEqual(t, int(size), max)
		f, err := decodeFrame(b[4:4+size], 2, 1)
		require.NoError(t, err)
		require.NotNil(t, f.chunk)
		out = append(out, f.chunk)
		b = b[4+size:]
	}
	return out
}

// chunkSeeds are the fuzz seeds of chunk frames: a good one, and one
// each of what decodeChunk refuses.
func chunkSeeds(t testing.TB) [][]byte {
	m := snapMsg(12, bytes.Repeat([]byte("s"), 3000))
	b, _ := appendFrames(nil, &frame{msgs: []groupMsg{{group: 9, msg: m}}}, 2048)
	size := binary.BigEndian.Uint32(b)
	good := bytes.Clone(b[4 : 4+size])
	env := proto.Clone(m).(*raftpb.Message)
	env.Snapshot.Data = nil
	raw := func(group, total, offset uint64, msg *raftpb.Message, data []byte) []byte {
		mb, _ := proto.Marshal(msg)
		out := []byte{frameChunk}
		out = binary.AppendUvarint(out, group)
		out = binary.AppendUvarint(out, total)
		out = binary.AppendUvarint(out, offset)
		out = binary.AppendUvarint(out, uint64(len(mb)))
		return append(append(out, mb...), data...)
	}
	withData := proto.Clone(m).(*raftpb.Message)
	withData.Snapshot.Data = []byte("x")
	app := proto.Clone(env).(*raftpb.Message)
	app.Type = raftpb.MsgApp.Enum()
	other := proto.Clone(env).(*raftpb.Message)
	other.From = proto.Uint64(3)
	return [][]byte{
		good,
		raw(9, 10, 0, env, []byte("0123456789")),
		raw(0, 10, 0, env, []byte("0123456789")),                   // group 0
		raw(9, 10, 8, env, []byte("0123")),                         // past the total
		raw(9, 10, 10, env, []byte("0")),                           // offset at the total
		raw(9, 10, 0, env, nil),                                    // no data
		raw(9, 10, 0, withData, []byte("0")),                       // data in the message
		raw(9, 10, 0, app, []byte("0")),                            // not a snapshot
		raw(9, 10, 0, other, []byte("0")),                          // from another member
		raw(9, 1<<62, 0, env, []byte("0")),                         // a huge total
		append([]byte{frameChunk, 9, 10, 0, 200}, []byte("ab")...), // message size past the body
	}
}

// TestChunkDecode checks the chunk seeds decode or fail as they say.
func TestChunkDecode(t *testing.T) {
	seeds := chunkSeeds(t)
	for i, s := range seeds {
		_, err := decodeFrame(s, 2, 1)
		if i < 2 || i == 9 {
			require.NoError(t, err, "seed %d", i)
		} else {
			require.ErrorIs(t, err, errFrame, "seed %d", i)
		}
	}
}

// TestSnapStaging reassembles a chunked snapshot and checks what the
// staging refuses: chunks out of turn, from another member or of another
// snapshot, a total past its bound; a newer transfer replaces an older
// one and a silent one expires.
func TestSnapStaging(t *testing.T) {
	data := make([]byte, 5000)
	for i := range data {
		data[i] = byte(i)
	}
	m := snapMsg(12, data)
	chunks := chunksOf(t, m, 2048)
	require.Greater(t, len(chunks), 3)
	newer := chunksOf(t, snapMsg(20, data), 2048)
	now := time.Now()

	s := newSnapStaging(1<<20, time.Second)
	for i, c := range chunks {
		got, err := s.add(2, c, now)
		require.NoError(t, err)
		if i < len(chunks)-1 {
			require.Nil(t, got)
			continue
		}
		require.True(t, proto.Equal(m, got), "the whole message")
	}
	require.Zero(t, s.held)
	require.Empty(t, s.groups)

	for _, tc := range []struct {
		name string
		feed func(s *snapStaging) error
		held uint64
	}{
		{"a chunk without its start", func(s *snapStaging) error { _, err := s.add(2, chunks[1], now); return err }, 0},
		{"a chunk skipped", func(s *snapStaging) error {
			_, _ = s.add(2, chunks[0], now)
			_, err := s.add(2, chunks[2], now)
			return err
		}, 0},
		{"a chunk from another member", func(s *snapStaging) error {
			_, _ = s.add(2, chunks[0], now)
			_, err := s.add(3, chunks[1], now)
			return err
		}, 0},
		{"a chunk of another snapshot", func(s *snapStaging) error {
			_, _ = s.add(2, chunks[0], now)
			_, err := s.add(2, newer[1], now)
			return err
		}, 0},
		{"a total past the bound", func(s *snapStaging) error {
			s.max = 4000
			_, err := s.add(2, chunks[0], now)
			return err
		}, 0},
		{"a newer transfer replaces the older", func(s *snapStaging) error {
			_, _ = s.add(2, chunks[0], now)
			_, err := s.add(2, newer[0], now)
			if err == nil {
				_, err = s.add(2, chunks[1], now) // the old one is gone
			}
			return err
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnapStaging(1<<20, time.Second)
			require.ErrorIs(t, tc.feed(s), errChunk)
			require.Equal(t, tc.held, s.held)
		})
	}

	s = newSnapStaging(1<<20, time.Second)
	_, err := s.add(2, chunks[0], now)
	require.NoError(t, err)
	require.Equal(t, uint64(len(data)), s.held)
	require.Zero(t, s.expire(now.Add(time.Second/2)))
	require.Equal(t, 1, s.expire(now.Add(time.Second)))
	require.Zero(t, s.held)
}

// TestSnapshotInChunks catches a new learner up from a snapshot several
// times larger than the frame limit, first over a link cut in the middle
// of the transfer (the staged part is abandoned, the leader sends it
// anew), then healed.
func TestSnapshotInChunks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const maxFrame = 128 << 10
	c := newTestCluster(t, 4, func(c *Config) {
		c.SnapshotEntries = 8
		c.SnapshotChunkTimeout = 300 * time.Millisecond
	})
	c.net.SetMaxFrame(maxFrame)
	const n = 60
	fillGroup(ctx, t, c, n)
	var snap bytes.Buffer
	require.NoError(t, c.members[1].sm(1).Snapshot(&snap))
	require.Greater(t, snap.Len(), 3*maxFrame, "the state is larger than a frame")

	lead := c.leader(ctx, 1, 1)
	c.net.CutAfter(lead, 4, 2)
	require.NoError(t, c.members[4].e.CreateGroup(ctx, 1, nil))
	require.NoError(t, c.members[lead].e.AddLearner(ctx, 1, 4))
	require.Eventually(t, func() bool { return c.members[lead].e.Stats().SnapshotsSent > 0 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(time.Second) // past the chunk timeout: the staged part expires
	require.Zero(t, c.members[4].sm(1).len(), "nothing restored from half a snapshot")
	// The state moves on: the next snapshot is another one, which must
	// not be mixed with the abandoned part.
	require.NoError(t, c.propose(ctx, 1, 1, []byte("during the cut")))
	c.net.Heal(lead, 4)

	require.Eventually(t, func() bool { return c.members[4].sm(1).len() >= n+1 }, 20*time.Second, 10*time.Millisecond, "the learner catches up")
	require.Eventually(t, func() bool { return c.converged(1, n+1) }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, c.propose(ctx, 1, 1, []byte("after")))
	require.Eventually(t, func() bool { return c.converged(1, n+2) }, 10*time.Second, 10*time.Millisecond)
}

// TestSnapshotInChunksTCP catches a new learner up over TCP from a
// snapshot several times larger than the transport's frame limit (which
// refuses, and closes the connection on, any larger frame).
func TestSnapshotInChunksTCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const maxFrame = 128 << 10
	c := newTCPClusterMax(t, 4, maxFrame, func(c *Config) { c.SnapshotEntries = 8 })
	const n = 60
	fillGroup(ctx, t, c, n)
	lead := c.leader(ctx, 1, 1)
	require.NoError(t, c.members[4].e.CreateGroup(ctx, 1, nil))
	require.NoError(t, c.members[lead].e.AddLearner(ctx, 1, 4))
	require.Eventually(t, func() bool { return c.converged(1, n) && c.members[4].sm(1).len() == n }, 20*time.Second, 10*time.Millisecond, "the learner catches up")
}

// fillGroup creates group 1 on members 1 to 3 and commits n commands of
// 8 KiB each to it.
func fillGroup(ctx context.Context, t *testing.T, c *testCluster, n int) {
	ids := []uint64{1, 2, 3}
	for _, id := range ids {
		require.NoError(t, c.members[id].e.CreateGroup(ctx, 1, ids))
	}
	require.NoError(t, c.members[1].e.Campaign(ctx, 1))
	for i := range n {
		cmd := append([]byte(fmt.Sprintf("cmd-%03d-", i)), bytes.Repeat([]byte{byte(i)}, 8<<10)...)
		require.NoError(t, c.propose(ctx, 1, 1, cmd))
	}
	require.Eventually(t, func() bool { return c.converged(1, n) }, 10*time.Second, 10*time.Millisecond)
}
