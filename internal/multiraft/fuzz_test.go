package multiraft

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/raftlink"
)

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the fuzz seed corpora in testdata/fuzz")

// fixedRand gives the same bytes every time: the fuzz target's nonces, so
// that a recorded dialer's bytes make a valid session again.
type fixedRand struct{}

func (fixedRand) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 0x5a
	}
	return len(p), nil
}

// sampleFrames are frames of each shape members send, from 2 to 1.
func sampleFrames(t testing.TB) []*frame {
	u := proto.Uint64
	ents := []*raftpb.Entry{{Term: u(3), Index: u(11), Data: []byte("a")}, {Term: u(3), Index: u(12), Data: []byte("b")}}
	return []*frame{
		{},
		{beats: []beat{{group: 1, term: 3, commit: 10}, {group: 2, term: 4, flags: beatResponse}, {group: 3, term: 3, commit: 9, flags: beatQuiesce}}},
		{msgs: []groupMsg{
			{group: 1, msg: &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: u(1), From: u(2), Term: u(3), LogTerm: u(2), Index: u(10), Entries: ents, Commit: u(10)}},
			{group: 5, msg: &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: u(1), From: u(2), Entries: []*raftpb.Entry{{Data: []byte("cmd")}}}},
			{group: 6, msg: &raftpb.Message{Type: raftpb.MsgPreVote.Enum(), To: u(1), From: u(2), Term: u(4), LogTerm: u(3), Index: u(12)}},
		}},
		{msgs: []groupMsg{{group: 9, msg: &raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: u(1), From: u(2), Term: u(3), Snapshot: &raftpb.Snapshot{
			Data: []byte("state"), Metadata: &raftpb.SnapshotMetadata{Index: u(12), Term: u(3), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}}}}},
	}
}

// TestFrameRoundTrip encodes each sample and decodes it back.
func TestFrameRoundTrip(t *testing.T) {
	for i, f := range sampleFrames(t) {
		b, dropped := appendFrames(nil, f, defaultMaxFrame)
		require.Empty(t, dropped)
		var got frame
		for len(b) > 0 {
			size := binary.BigEndian.Uint32(b)
			part, err := decodeFrame(b[4:4+size], 2, 1)
			require.NoError(t, err, "sample %d", i)
			got.msgs, got.beats = append(got.msgs, part.msgs...), append(got.beats, part.beats...)
			b = b[4+size:]
		}
		require.Equal(t, f.beats, got.beats, "sample %d", i)
		require.Len(t, got.msgs, len(f.msgs))
		for j := range f.msgs {
			require.Equal(t, f.msgs[j].group, got.msgs[j].group)
			require.True(t, proto.Equal(f.msgs[j].msg, got.msgs[j].msg), "sample %d message %d", i, j)
		}
	}
	// Messages past the frame bound are split into several frames, and
	// one message larger than it is dropped.
	big := &frame{msgs: []groupMsg{
		{group: 1, msg: &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: proto.Uint64(1), From: proto.Uint64(2), Entries: []*raftpb.Entry{{Data: make([]byte, 600)}}}},
		{group: 2, msg: &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: proto.Uint64(1), From: proto.Uint64(2), Entries: []*raftpb.Entry{{Data: make([]byte, 600)}}}},
		{group: 3, msg: &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: proto.Uint64(1), From: proto.Uint64(2), Entries: []*raftpb.Entry{{Data: make([]byte, 5000)}}}},
	}}
	b, dropped := appendFrames(nil, big, 1024)
	require.Len(t, dropped, 1)
	require.Equal(t, uint64(3), dropped[0].group)
	frames := 0
	for len(b) > 0 {
		size := binary.BigEndian.Uint32(b)
		require.LessOrEqual(t, int(size), 1024)
		_, err := decodeFrame(b[4:4+size], 2, 1)
		require.NoError(t, err)
		b, frames = b[4+size:], frames+1
	}
	require.Equal(t, 2, frames)
}

// serveSession runs member 1's side of a connection from member 2 on in,
// as TCPTransport does: the duplex handshake, then frames of at most
// limit bytes, each decoded and checked.
func serveSession(in io.Reader, secret []byte, limit int) ([]frame, raftlink.Hello, error) {
	hs := raftlink.Handshaker{Proto: &protocol, Self: 1, Secret: secret, Rand: fixedRand{}}
	h, r, _, err := hs.AcceptDuplex(bufio.NewReader(in), io.Discard, func(id uint64) bool { return id == 2 })
	if err != nil {
		return nil, h, err
	}
	var got []frame
	var buf []byte
	for {
		b, err := raftlink.ReadFrame(r, limit, buf)
		if err != nil {
			return got, h, err
		}
		f, err := decodeFrame(b, h.From, 1)
		if err != nil {
			return got, h, err
		}
		got = append(got, f)
		buf = b[:0]
	}
}

// recordSession runs member 2's dialer against serveSession over a pipe,
// writes frames, and returns the bytes the acceptor read.
func recordSession(t testing.TB, secret []byte, raw [][]byte) []byte {
	a, b := net.Pipe()
	var sent bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The acceptor's answers must reach the dialer: a duplex pipe.
		serveDuplex(io.TeeReader(b, &sent), b, secret)
		b.Close()
	}()
	hs := raftlink.Handshaker{Proto: &protocol, Self: 2, Secret: secret, Rand: fixedRand{}}
	_, w, err := hs.DialDuplex(a, bufio.NewReader(a), kindGroups, 1)
	require.NoError(t, err)
	bw := bufio.NewWriter(w)
	for _, f := range raw {
		bw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(f))))
		bw.Write(f)
		bw.Flush()
	}
	a.Close()
	<-done
	return sent.Bytes()
}

func serveDuplex(in io.Reader, out io.Writer, secret []byte) {
	hs := raftlink.Handshaker{Proto: &protocol, Self: 1, Secret: secret, Rand: fixedRand{}}
	_, r, _, err := hs.AcceptDuplex(bufio.NewReader(in), out, func(id uint64) bool { return id == 2 })
	if err == nil {
		io.Copy(io.Discard, r)
	}
}

func fuzzFrameSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, f := range sampleFrames(t) {
		b, _ := appendFrames(nil, f, defaultMaxFrame)
		seeds = append(seeds, b[4:])
	}
	for _, b := range badFrames(t) {
		seeds = append(seeds, b)
	}
	return append(seeds, chunkSeeds(t)...)
}

func fuzzSessionSeeds(t testing.TB) [][]byte {
	var good [][]byte
	for _, f := range sampleFrames(t) {
		b, _ := appendFrames(nil, f, defaultMaxFrame)
		good = append(good, b[4:])
	}
	wrap := badFrames(t)["a wrapping term"]
	var seeds [][]byte
	for _, secret := range [][]byte{testSecret, nil} {
		seeds = append(seeds, recordSession(t, secret, good), recordSession(t, secret, [][]byte{wrap}))
	}
	h := raftlink.Hello{Kind: kindGroups, Auth: raftlink.AuthSecret, From: 2, To: 1}
	return append(seeds,
		append(binary.BigEndian.AppendUint32(nil, uint32(len(wrap))), wrap...), // no handshake at all
		h.Append(nil, &protocol),
		append(h.Append(nil, &protocol), 0x40, 0, 0, 0))
}

// FuzzDecodeFrame decodes arbitrary bytes as a frame from member 2 to
// member 1: no input panics, and whatever decodes passes the checks raft's
// Step needs.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range fuzzFrameSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, err := decodeFrame(in, 2, 1)
		if err != nil {
			require.True(t, errors.Is(err, errFrame), "%v", err)
			return
		}
		for _, gm := range fr.msgs {
			require.NoError(t, raftlink.CheckMessage(gm.msg, 1))
			require.Equal(t, uint64(2), gm.msg.GetFrom())
			require.NoError(t, checkGroupID(gm.group))
		}
		for _, h := range fr.beats {
			require.NoError(t, checkGroupID(h.group))
			require.LessOrEqual(t, h.term, uint64(raftlink.MaxTerm))
		}
		if c := fr.chunk; c != nil {
			require.NoError(t, checkGroupID(c.group))
			require.NoError(t, raftlink.CheckMessage(c.msg, 1))
			require.Equal(t, raftpb.MsgSnap, c.msg.GetType())
			require.NotEmpty(t, c.data)
			require.LessOrEqual(t, c.offset+uint64(len(c.data)), c.total)
			// Staging a hostile chunk holds no more than its bound.
			s := newSnapStaging(1<<20, time.Minute)
			_, _ = s.add(2, c, time.Now())
			require.LessOrEqual(t, s.held, uint64(1<<20))
		}
	})
}

// FuzzSession feeds arbitrary bytes to a member as a dialer's: the
// handshake, sealed records and frames, with the nonces fixed so that the
// seeds are valid sessions. No input panics or yields a frame before a
// member's handshake passed, and every message read passes the checks.
func FuzzSession(f *testing.F) {
	for _, s := range fuzzSessionSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, secret := range [][]byte{testSecret, nil} {
			got, h, err := serveSession(bytes.NewReader(in), secret, 64<<10)
			require.Error(t, err, "the input ends")
			if len(got) > 0 {
				require.Equal(t, uint64(2), h.From, "frames only after a member's handshake")
				require.GreaterOrEqual(t, len(in), raftlink.HelloSize)
			}
			for _, fr := range got {
				for _, gm := range fr.msgs {
					require.NoError(t, raftlink.CheckMessage(gm.msg, 1))
				}
			}
		}
	})
}

// TestWriteFuzzSeeds writes the fuzz targets' seed corpora when
// -write-seeds is set.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-seeds to rewrite testdata/fuzz")
	}
	for name, seeds := range map[string][][]byte{"FuzzDecodeFrame": fuzzFrameSeeds(t), "FuzzSession": fuzzSessionSeeds(t)} {
		dir := filepath.Join("testdata", "fuzz", name)
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for i, in := range seeds {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(in)))
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%03d", i)), []byte(content), 0o644))
		}
	}
}

// TestSessionReplays checks the session seeds are what they claim: under
// fixed nonces a recorded session replays whole, frames included; a
// record changed anywhere stops the acceptor before the frames after it.
func TestSessionReplays(t *testing.T) {
	var good [][]byte
	for _, f := range sampleFrames(t) {
		b, _ := appendFrames(nil, f, defaultMaxFrame)
		good = append(good, b[4:])
	}
	for _, secret := range [][]byte{testSecret, nil} {
		sent := recordSession(t, secret, good)
		got, h, err := serveSession(bytes.NewReader(sent), secret, 64<<10)
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, uint64(2), h.From)
		require.Len(t, got, len(good))
		if secret != nil {
			flipped := bytes.Clone(sent)
			flipped[len(flipped)-1] ^= 1
			got, _, err = serveSession(bytes.NewReader(flipped), secret, 64<<10)
			require.ErrorIs(t, err, raftlink.ErrRecord)
			require.Less(t, len(got), len(good))
		}
	}
}
