package raft

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/warrenmq/broker/internal/raftlink"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the fuzz seed corpora in testdata/fuzz")

var fuzzSecret = []byte("warren fuzz cluster secret, 32 b")

// fixedRand gives the same bytes every time: the fuzz target's nonces, so
// that a recorded dialer's bytes make a valid session again (with random
// nonces, as members use, a replay fails: TestHandshakeReplay).
type fixedRand struct{}

func (fixedRand) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 0x5a
	}
	return len(p), nil
}

// session is what an acceptor read from one dialer.
type session struct {
	hello raftlink.Hello
	raft  []*raftpb.Message
	msgs  [][]byte
}

// serve runs member 1's side of a connection on in, as the transport
// does: the handshake (member 2 is known), then frames of at most limit
// bytes, each raft message decoded and checked as before raft's Step.
func serve(in io.Reader, out io.Writer, secret []byte, random io.Reader, limit int) (session, error) {
	hs := raftlink.Handshaker{Proto: &protocol, Self: 1, Secret: secret, Rand: random}
	h, r, err := hs.Accept(bufio.NewReader(in), out, func(id uint64) bool { return id == 2 })
	s := session{hello: h}
	if err != nil {
		return s, err
	}
	var buf []byte
	for {
		b, err := raftlink.ReadFrame(r, limit, buf)
		if err != nil {
			return s, err
		}
		if h.Kind == kindMessages {
			s.msgs = append(s.msgs, bytes.Clone(b))
			continue
		}
		m, err := decodeRaft(b, h.From, 1)
		if err != nil {
			return s, err
		}
		if err := raftlink.CheckMessage(m, 1); err != nil {
			return s, err
		}
		s.raft = append(s.raft, m)
		buf = b[:0]
	}
}

// record runs member 2's dialer against serve over a pipe, writes frames
// through what the handshake returned, and returns the bytes serve read
// from the dialer, what it made of them, and why it stopped (io.EOF when
// the dialer was done).
func record(t testing.TB, secret []byte, random func() io.Reader, kind byte, frames [][]byte) ([]byte, session, error) {
	a, b := net.Pipe()
	var sent bytes.Buffer
	done := make(chan struct{})
	var got session
	var serr error
	go func() {
		defer close(done)
		got, serr = serve(io.TeeReader(b, &sent), b, secret, random(), 1<<20)
		b.Close()
	}()
	hs := raftlink.Handshaker{Proto: &protocol, Self: 2, Secret: secret, Rand: random()}
	w, err := hs.Dial(a, kind, 1)
	if err == nil {
		// Written as the transport does, through a buffer, flushed
		// (one sealed record) a frame; serve may stop reading at a
		// frame it refuses.
		bw := bufio.NewWriter(w)
		for _, f := range frames {
			bw.Write(binary.BigEndian.AppendUint32(nil, uint32(len(f))))
			bw.Write(f)
			bw.Flush()
		}
	}
	a.Close()
	<-done
	if err != nil {
		return nil, got, err
	}
	return sent.Bytes(), got, serr
}

func raftFrame(t testing.TB, m *raftpb.Message) []byte {
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

// sampleFrames are raft messages of each shape a member sends, from 2 to 1.
func sampleFrames(t testing.TB) [][]byte {
	u := proto.Uint64
	ents := []*raftpb.Entry{{Term: u(3), Index: u(11), Data: []byte("a")}, {Term: u(3), Index: u(12), Data: []byte("b")}}
	return [][]byte{
		raftFrame(t, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: u(1), From: u(2), Term: u(3), Commit: u(10)}),
		raftFrame(t, &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: u(1), From: u(2), Term: u(3), LogTerm: u(2), Index: u(10), Entries: ents, Commit: u(10)}),
		raftFrame(t, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: u(1), From: u(2), Entries: []*raftpb.Entry{{Data: []byte("cmd")}}}),
		raftFrame(t, &raftpb.Message{Type: raftpb.MsgSnap.Enum(), To: u(1), From: u(2), Term: u(3), Snapshot: &raftpb.Snapshot{
			Data: []byte("state"), Metadata: &raftpb.SnapshotMetadata{Index: u(12), Term: u(3), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}}),
		raftFrame(t, &raftpb.Message{Type: raftpb.MsgPreVote.Enum(), To: u(1), From: u(2), Term: u(4), LogTerm: u(3), Index: u(12)}),
	}
}

// TestHandshake runs sessions of each kind with and without a secret: the
// acceptor reads exactly the frames the dialer wrote.
func TestHandshake(t *testing.T) {
	frames := sampleFrames(t)
	for _, secret := range [][]byte{fuzzSecret, nil} {
		for _, kind := range []byte{kindRaft, kindMessages} {
			t.Run(fmt.Sprintf("secret=%v/kind=%d", secret != nil, kind), func(t *testing.T) {
				_, got, err := record(t, secret, func() io.Reader { return rand.Reader }, kind, frames)
				require.ErrorIs(t, err, io.EOF)
				require.Equal(t, uint64(2), got.hello.From)
				if kind == kindMessages {
					require.Equal(t, frames, got.msgs)
					return
				}
				require.Len(t, got.raft, len(frames))
				for i, m := range got.raft {
					require.Equal(t, frames[i], raftFrame(t, m))
				}
			})
		}
	}
}

// TestHandshakeReplay replays what a real member sent in one session to a
// member that chose a fresh nonce: the proof fails, and no frame is read.
func TestHandshakeReplay(t *testing.T) {
	sent, _, err := record(t, fuzzSecret, func() io.Reader { return rand.Reader }, kindRaft, sampleFrames(t))
	require.ErrorIs(t, err, io.EOF)
	got, err := serve(bytes.NewReader(sent), io.Discard, fuzzSecret, rand.Reader, 1<<20)
	require.ErrorIs(t, err, raftlink.ErrBadProof)
	require.Empty(t, got.raft)

	// The acceptor's side replayed to a dialer fails the same way: its
	// nonce is new.
	var answer bytes.Buffer
	hs := raftlink.Handshaker{Proto: &protocol, Self: 1, Secret: fuzzSecret, Rand: rand.Reader}
	_, _, err = hs.Accept(bufio.NewReader(bytes.NewReader(sent)), &answer, func(uint64) bool { return true })
	require.ErrorIs(t, err, raftlink.ErrBadProof)
	dialer := raftlink.Handshaker{Proto: &protocol, Self: 2, Secret: fuzzSecret, Rand: rand.Reader}
	_, err = dialer.Dial(struct {
		io.Reader
		io.Writer
	}{&answer, io.Discard}, kindRaft, 1)
	require.ErrorIs(t, err, raftlink.ErrBadProof)
}

// TestSealedRecordsRefuseTampering changes, drops, repeats and cuts the
// sealed bytes of a session: the acceptor stops at the record that does
// not open, having read only the frames before it.
func TestSealedRecordsRefuseTampering(t *testing.T) {
	frames := sampleFrames(t)
	sent, _, err := record(t, fuzzSecret, func() io.Reader { return fixedRand{} }, kindRaft, frames)
	require.ErrorIs(t, err, io.EOF)
	body := raftlink.HelloSize + raftlink.ProofSize // the records start here
	got, err := serve(bytes.NewReader(sent), io.Discard, fuzzSecret, fixedRand{}, 1<<20)
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, got.raft, len(frames), "the recorded session replays under fixed nonces")

	flipped := bytes.Clone(sent)
	flipped[len(flipped)-1] ^= 1
	recLen := 2 + int(binary.BigEndian.Uint16(sent[body:]))
	twice := append(append(bytes.Clone(sent[:body+recLen]), sent[body:body+recLen]...), sent[body+recLen:]...)
	for name, in := range map[string][]byte{
		"a bit flipped":   flipped,
		"a record twice":  twice,
		"a record gone":   append(bytes.Clone(sent[:body]), sent[body+recLen:]...),
		"cut in a record": sent[:len(sent)-3],
	} {
		t.Run(name, func(t *testing.T) {
			_, err := serve(bytes.NewReader(in), io.Discard, fuzzSecret, fixedRand{}, 1<<20)
			require.Error(t, err)
			require.False(t, errors.Is(err, io.EOF), "%v", err)
		})
	}
}

// spyReader records the largest buffer it was asked to fill: the bytes
// read before plus the length of the read's buffer.
type spyReader struct {
	r         io.Reader
	read, max int
}

func (s *spyReader) Read(p []byte) (int, error) {
	s.max = max(s.max, s.read+len(p))
	n, err := s.r.Read(p)
	s.read += n
	return n, err
}

// TestReadFrameGrowsWithArrival reads frames announcing up to the limit
// whose bytes stop early: the frame's buffer follows what arrived (at most
// twice it, or the first 64 KiB), never the announced length.
func TestReadFrameGrowsWithArrival(t *testing.T) {
	for _, arrived := range []int{0, 1000, 200 << 10, 3 << 20} {
		r := &spyReader{r: bytes.NewReader(append([]byte{0x40, 0, 0, 0}, make([]byte, arrived)...))}
		_, err := raftlink.ReadFrame(r, 1<<30, nil)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		t.Logf("1 GiB announced, %d bytes arrived: a buffer of %d bytes", arrived, r.max-4)
		require.LessOrEqual(t, r.max-4, max(2*arrived, raftlink.FrameChunk))
	}
	_, err := raftlink.ReadFrame(bytes.NewReader([]byte{0x40, 0, 0, 1}), 1<<30, nil)
	require.ErrorIs(t, err, raftlink.ErrFrameSize)
}

// fuzzSeeds are sessions of each kind and authentication, whole, with the
// 21-byte packet that wrapped raft's term after them, and some that fail.
func fuzzSeeds(t testing.TB) [][]byte {
	u := proto.Uint64
	wrap := raftFrame(t, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: u(1), From: u(2), Term: u(math.MaxUint64)})
	var seeds [][]byte
	for _, secret := range [][]byte{fuzzSecret, nil} {
		for _, kind := range []byte{kindRaft, kindMessages} {
			for _, frames := range [][][]byte{sampleFrames(t), {wrap}, {{}, []byte("x")}} {
				// The wrapping packet ends its session at checkMessage.
				sent, _, _ := record(t, secret, func() io.Reader { return fixedRand{} }, kind, frames)
				require.NotEmpty(t, sent)
				seeds = append(seeds, sent)
			}
		}
	}
	h := raftlink.Hello{Kind: kindRaft, Auth: raftlink.AuthSecret, From: 2, To: 1}
	seeds = append(seeds,
		append(binary.BigEndian.AppendUint32(nil, uint32(len(wrap))), wrap...), // no handshake at all
		h.Append(nil, &protocol),                        // a hello, then nothing
		append(h.Append(nil, &protocol), 0x40, 0, 0, 0), // a hello, then a frame's header
	)
	return seeds
}

// FuzzTransport feeds arbitrary bytes to a member as a dialer's: the
// handshake, sealed records and frames are decoded as the transport does,
// with the nonces fixed so that the seeds are valid sessions. No input
// panics or makes the member read a frame before the handshake passed,
// and every raft message it reads passes checkMessage.
func FuzzTransport(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, secret := range [][]byte{fuzzSecret, nil} {
			got, err := serve(bytes.NewReader(in), io.Discard, secret, fixedRand{}, 64<<10)
			require.Error(t, err, "the input ends")
			for _, m := range got.raft {
				require.NoError(t, raftlink.CheckMessage(m, 1))
				require.Equal(t, uint64(2), m.GetFrom())
			}
			if len(got.raft)+len(got.msgs) > 0 {
				require.Equal(t, uint64(2), got.hello.From, "frames only after a member's handshake")
				require.GreaterOrEqual(t, len(in), raftlink.HelloSize)
			}
		}
	})
}

// TestWriteFuzzSeeds writes FuzzTransport's seed corpus when -write-seeds
// is set.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-seeds to rewrite testdata/fuzz")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzTransport")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for i, in := range fuzzSeeds(t) {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(in)))
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%03d", i)), []byte(content), 0o644))
	}
}
