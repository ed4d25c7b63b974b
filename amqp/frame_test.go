package amqp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// stream is a few frames of every type, as a client would send them.
func stream() ([]byte, []Frame) {
	pub := &BasicPublish{Exchange: "ex", RoutingKey: "rk", Mandatory: true}
	props := (&Properties{ContentType: "text/plain", DeliveryMode: 2}).Append(nil)
	body := bytes.Repeat([]byte("0123456789"), 1000)
	var b []byte
	b = AppendHeartbeatFrame(b)
	b = AppendMethodFrame(b, 1, pub)
	b = AppendHeaderFrame(b, 1, ClassBasic, uint64(len(body)), props)
	b = AppendBodyFrames(b, 1, body, 4096)
	b = AppendFrame(b, FrameBody, 2, nil)

	hdr := append([]byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0x27, 0x10}, props...)
	want := []Frame{
		{Type: FrameHeartbeat, Payload: []byte{}},
		{Type: FrameMethod, Channel: 1, Payload: AppendMethod(nil, pub)},
		{Type: FrameHeader, Channel: 1, Payload: hdr},
		{Type: FrameBody, Channel: 1, Payload: body[:4088]},
		{Type: FrameBody, Channel: 1, Payload: body[4088:8176]},
		{Type: FrameBody, Channel: 1, Payload: body[8176:]},
		{Type: FrameBody, Channel: 2, Payload: []byte{}},
	}
	return b, want
}

func TestFrameReaderStreams(t *testing.T) {
	data, want := stream()
	for _, tc := range []struct {
		name string
		r    func() io.Reader
	}{
		{"whole", func() io.Reader { return bytes.NewReader(data) }},
		{"one byte at a time", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) }},
		{"half reads", func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) }},
		{"data with EOF", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) }},
		{"zero reads in between", func() io.Reader { return &stutterReader{r: bytes.NewReader(data)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := NewFrameReader(tc.r())
			fr.SetMaxFrameSize(FrameMinSize)
			for i, w := range want {
				f, err := fr.ReadFrame()
				require.NoError(t, err, "frame %d", i)
				require.Equal(t, w.Type, f.Type, "frame %d", i)
				require.Equal(t, w.Channel, f.Channel, "frame %d", i)
				require.Equal(t, w.Payload, f.Payload, "frame %d", i)
			}
			_, err := fr.ReadFrame()
			require.ErrorIs(t, err, io.EOF)
			_, err = fr.ReadFrame()
			require.ErrorIs(t, err, io.EOF, "EOF sticks")
		})
	}
}

// stutterReader returns 0, nil before every byte, which io.Reader allows now and then.
type stutterReader struct {
	r    io.Reader
	zero bool
}

func (s *stutterReader) Read(p []byte) (int, error) {
	if s.zero = !s.zero; s.zero {
		return 0, nil
	}
	return s.r.Read(p[:min(len(p), 1)])
}

func TestFrameReaderProtocolHeader(t *testing.T) {
	data := append([]byte("AMQP\x00\x00\x09\x01"), AppendHeartbeatFrame(nil)...)
	fr := NewFrameReader(iotest.OneByteReader(bytes.NewReader(data)))
	h, err := fr.ReadProtocolHeader()
	require.NoError(t, err)
	require.Equal(t, [8]byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}, h)
	f, err := fr.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, FrameHeartbeat, f.Type)

	_, err = NewFrameReader(strings.NewReader("AMQP")).ReadProtocolHeader()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = NewFrameReader(strings.NewReader("")).ReadProtocolHeader()
	require.ErrorIs(t, err, io.EOF)
}

func TestFrameReaderErrors(t *testing.T) {
	method := AppendMethodFrame(nil, 1, &ChannelOpen{})
	badEnd := append([]byte(nil), method...)
	badEnd[len(badEnd)-1] = 0xCD
	for _, tc := range []struct {
		name string
		in   []byte
		max  uint32
		code uint16 // 0: want ioErr
		io   error
	}{
		{"bad frame end", badEnd, 0, FrameError, nil},
		{"unknown type", []byte{4, 0, 0, 0, 0, 0, 0, 0xCE}, 0, FrameError, nil},
		{"type zero", []byte{0, 0, 0, 0, 0, 0, 0, 0xCE}, 0, FrameError, nil},
		{"heartbeat on a channel", []byte{8, 0, 1, 0, 0, 0, 0, 0xCE}, 0, FrameError, nil},
		{"heartbeat with payload", []byte{8, 0, 0, 0, 0, 0, 1, 0, 0xCE}, 0, FrameError, nil},
		{"oversized", AppendFrame(nil, FrameBody, 1, make([]byte, 4089)), 4096, FrameError, nil},
		{"huge size, no limit, no data", []byte{3, 0, 1, 0xff, 0xff, 0xff, 0xff, 1, 2}, 0, 0, io.ErrUnexpectedEOF},
		{"truncated header", method[:5], 0, 0, io.ErrUnexpectedEOF},
		{"truncated payload", method[:len(method)-2], 0, 0, io.ErrUnexpectedEOF},
		{"missing frame end", method[:len(method)-1], 0, 0, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := NewFrameReader(bytes.NewReader(tc.in))
			fr.SetMaxFrameSize(tc.max)
			_, err := fr.ReadFrame()
			if tc.code != 0 {
				requireCode(t, tc.code, err)
				require.True(t, strings.HasPrefix(err.Error(), "amqp: 501 FRAME_ERROR - "), err.Error())
				return
			}
			require.ErrorIs(t, err, tc.io)
		})
	}
	// The largest allowed frame passes.
	fr := NewFrameReader(bytes.NewReader(AppendFrame(nil, FrameBody, 1, make([]byte, 4088))))
	fr.SetMaxFrameSize(4096)
	f, err := fr.ReadFrame()
	require.NoError(t, err)
	require.Len(t, f.Payload, 4088)
}

// headerOnlyReader serves a frame header and fails the test's expectations if the
// reader asks for more: an oversized frame must be refused before its payload is read.
type headerOnlyReader struct {
	data  []byte
	reads int
}

func (h *headerOnlyReader) Read(p []byte) (int, error) {
	h.reads++
	if len(h.data) == 0 {
		return 0, errors.New("payload read")
	}
	n := copy(p, h.data)
	h.data = h.data[n:]
	return n, nil
}

func TestFrameReaderRefusesBeforeReadingPayload(t *testing.T) {
	r := &headerOnlyReader{data: []byte{3, 0, 1, 0x7f, 0xff, 0xff, 0xff}}
	fr := NewFrameReader(r)
	fr.SetMaxFrameSize(1 << 20)
	_, err := fr.ReadFrame()
	requireCode(t, FrameError, err)
	require.Equal(t, 1, r.reads)
	require.LessOrEqual(t, len(fr.buf), initialBufferSize)
}

func TestFrameReaderGrowsWithData(t *testing.T) {
	// A header claiming 2 GiB followed by 10 KiB: the buffer follows the data.
	data := append([]byte{3, 0, 1, 0x7f, 0xff, 0xff, 0xff}, make([]byte, 10<<10)...)
	fr := NewFrameReader(bytes.NewReader(data))
	_, err := fr.ReadFrame()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.LessOrEqual(t, len(fr.buf), 2*len(data))
}

func TestFrameReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := NewFrameReader(iotest.ErrReader(boom)).ReadFrame()
	require.ErrorIs(t, err, boom)

	// An error after a complete frame is reported at the next read, not lost or early.
	data := AppendHeartbeatFrame(nil)
	fr := NewFrameReader(io.MultiReader(bytes.NewReader(data), iotest.ErrReader(boom)))
	_, err = fr.ReadFrame()
	require.NoError(t, err)
	_, err = fr.ReadFrame()
	require.ErrorIs(t, err, boom)

	// A reader that never makes progress ends with io.ErrNoProgress instead of spinning.
	_, err = NewFrameReader(zeroReader{}).ReadFrame()
	require.ErrorIs(t, err, io.ErrNoProgress)
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestFrameFixtures(t *testing.T) {
	// Bytes from the spec's frame layout, written by hand.
	require.Equal(t, []byte{8, 0, 0, 0, 0, 0, 0, 0xCE}, AppendHeartbeatFrame(nil))
	require.Equal(t, []byte{3, 0, 5, 0, 0, 0, 2, 'h', 'i', 0xCE}, AppendFrame(nil, FrameBody, 5, []byte("hi")))
	require.Equal(t, []byte{
		1, 0, 1, 0, 0, 0, 0x0d, // method frame, channel 1, 13 octets
		0, 60, 0, 80, // basic.ack
		0, 0, 0, 0, 0, 0, 0, 42, // delivery-tag
		1,    // multiple
		0xCE, //
	}, AppendMethodFrame(nil, 1, &BasicAck{DeliveryTag: 42, Multiple: true}))
	require.Equal(t, []byte{
		2, 0, 1, 0, 0, 0, 0x0e, // header frame, channel 1, 14 octets
		0, 60, 0, 0, // class basic, weight
		0, 0, 0, 0, 0, 0, 0, 5, // body size
		0, 0, // no properties
		0xCE,
	}, AppendHeaderFrame(nil, 1, ClassBasic, 5, []byte{0, 0}))
}

func TestAppendBodyFrames(t *testing.T) {
	body := bytes.Repeat([]byte{'x'}, 100)
	for _, tc := range []struct {
		name     string
		frameMax uint32
		sizes    []int
	}{
		{"no limit", 0, []int{100}},
		{"exact", 108, []int{100}},
		{"split", 58, []int{50, 50}},
		{"uneven", 40, []int{32, 32, 32, 4}},
		{"too small limit means min size", 8, []int{100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := NewFrameReader(bytes.NewReader(AppendBodyFrames(nil, 9, body, tc.frameMax)))
			var got []byte
			for _, n := range tc.sizes {
				f, err := fr.ReadFrame()
				require.NoError(t, err)
				require.Equal(t, FrameBody, f.Type)
				require.Equal(t, uint16(9), f.Channel)
				require.Len(t, f.Payload, n)
				got = append(got, f.Payload...)
			}
			_, err := fr.ReadFrame()
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, body, got)
		})
	}
	require.Empty(t, AppendBodyFrames(nil, 1, nil, 0))
}

func TestFramePayloadCapped(t *testing.T) {
	// Appending to a payload must not overwrite the next frame in the reader's buffer.
	data := append(AppendFrame(nil, FrameBody, 1, []byte("a")), AppendFrame(nil, FrameBody, 1, []byte("b"))...)
	fr := NewFrameReader(bytes.NewReader(data))
	f, err := fr.ReadFrame()
	require.NoError(t, err)
	_ = append(f.Payload, 'Z', 'Z', 'Z', 'Z', 'Z', 'Z', 'Z', 'Z', 'Z', 'Z')
	f, err = fr.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, []byte("b"), f.Payload)
}

// lyingReader claims to have read more than the buffer holds.
type lyingReader struct{}

func (lyingReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

func TestFrameReaderDistrustsBrokenReader(t *testing.T) {
	_, err := NewFrameReader(lyingReader{}).ReadFrame()
	require.ErrorIs(t, err, io.ErrShortBuffer)
}

// idleSource is an IdleWaiter over chunks of input: ReadNoWait returns the
// next chunk or ErrWouldBlock between them, and WaitReadable records what
// the reader held while it waited.
type idleSource struct {
	chunks  [][]byte
	next    int
	blocked bool // between chunks: the next ReadNoWait would block
	fr      *FrameReader
	held    []int // the reader's buffer size at each WaitReadable
}

func (s *idleSource) Read(p []byte) (int, error) {
	if s.next == len(s.chunks) {
		return 0, io.EOF
	}
	n := copy(p, s.chunks[s.next])
	s.chunks[s.next] = s.chunks[s.next][n:]
	if len(s.chunks[s.next]) == 0 {
		s.next++
		s.blocked = true
	}
	return n, nil
}

func (s *idleSource) ReadNoWait(p []byte) (int, error) {
	if s.blocked {
		return 0, ErrWouldBlock
	}
	return s.Read(p)
}

func (s *idleSource) WaitReadable() error {
	if s.fr != nil {
		s.held = append(s.held, s.fr.BufferSize())
	}
	s.blocked = false
	return nil
}

// parkingSource is idleSource as a ParkingReader: a read that would block
// parks, recording what the reader held then, and reads on.
type parkingSource struct{ *idleSource }

func (s parkingSource) ReadOrPark(next func() []byte, park func()) (int, error) {
	if s.blocked {
		park()
		if s.fr != nil {
			s.held = append(s.held, s.fr.BufferSize())
		}
		s.blocked = false
	}
	return s.Read(next())
}

// idleReaders runs test with a FrameReader on an idleSource of chunks,
// once as an IdleWaiter and once as a ParkingReader.
func idleReaders(t *testing.T, chunks [][]byte, test func(t *testing.T, r *FrameReader, src *idleSource)) {
	for _, parking := range []bool{false, true} {
		t.Run(fmt.Sprintf("parking=%v", parking), func(t *testing.T) {
			src := &idleSource{chunks: slices.Clone(chunks)}
			r := NewFrameReader(src)
			if parking {
				r.SetIdleWaiter(parkingSource{src})
			} else {
				r.SetIdleWaiter(src)
			}
			src.fr = r
			test(t, r, src)
		})
	}
}

// TestFrameReaderIdleWaiterReleasesBuffer: with an IdleWaiter, a reader
// that has read every frame waits holding no buffer, a buffer grown for a
// large frame included, and reads the same frames as without one.
func TestFrameReaderIdleWaiterReleasesBuffer(t *testing.T) {
	small := AppendMethodFrame(nil, 1, &ChannelOpen{})
	large := AppendFrame(nil, FrameBody, 1, bytes.Repeat([]byte("x"), 20000))
	half := len(large) / 2
	idleReaders(t, [][]byte{small, large[:half], large[half:], append(small, small...)}, func(t *testing.T, r *FrameReader, src *idleSource) {

		var got []Frame
		for {
			f, err := r.ReadFrame()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			f.Payload = bytes.Clone(f.Payload)
			got = append(got, f)
		}
		require.Len(t, got, 4)
		require.Len(t, got[1].Payload, 20000)
		// Waits: after the first frame (empty), none inside the large frame
		// (a partial frame keeps its buffer and reads on), after the large
		// frame and after the last two.
		require.Equal(t, []int{0, 0, 0}, src.held, "buffer held while waiting")
	})
}

// TestFrameReaderIdleWaiterAllocatesNothing: giving the buffer back and
// taking it again around each wait allocates nothing once warm, as
// ReadFrame promises.
func TestFrameReaderIdleWaiterAllocatesNothing(t *testing.T) {
	frame := AppendMethodFrame(nil, 1, &ChannelOpen{})
	idleReaders(t, nil, func(t *testing.T, r *FrameReader, src *idleSource) {
		chunks := make([][]byte, 1)
		read := func() {
			chunks[0] = frame
			src.chunks, src.next, src.blocked = chunks, 0, true
			_, err := r.ReadFrame()
			require.NoError(t, err)
		}
		read()
		src.held = make([]int, 0, 1000)
		require.Zero(t, testing.AllocsPerRun(100, read))
	})
}

// TestFrameReaderReadsAheadUnderLoad: with an IdleWaiter, reads that fill
// the buffer double it, up to maxReadAhead, so a stream of small frames
// arriving faster than they are handled is read in fewer, larger reads;
// the frames are read as they were written.
func TestFrameReaderReadsAheadUnderLoad(t *testing.T) {
	frame := AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "ex", RoutingKey: "a key"})
	var input []byte
	for len(input) < 4*maxReadAhead {
		input = append(input, frame...)
	}
	idleReaders(t, [][]byte{input}, func(t *testing.T, r *FrameReader, _ *idleSource) {
		largest := 0
		for range len(input) / len(frame) {
			f, err := r.ReadFrame()
			require.NoError(t, err)
			require.Equal(t, frame[7:len(frame)-1], f.Payload)
			largest = max(largest, r.BufferSize())
		}
		require.Equal(t, maxReadAhead, largest)
	})
}

// TestFrameReaderBufferAfterWaitStartsSmall: a read that filled the buffer
// just before the reader waited does not make the buffer it takes after
// the wait larger: the input stopped.
func TestFrameReaderBufferAfterWaitStartsSmall(t *testing.T) {
	exact := AppendFrame(nil, FrameBody, 1, bytes.Repeat([]byte("x"), initialBufferSize-8))
	require.Len(t, exact, initialBufferSize)
	small := AppendMethodFrame(nil, 1, &ChannelOpen{})
	idleReaders(t, [][]byte{exact, small}, func(t *testing.T, r *FrameReader, _ *idleSource) {
		_, err := r.ReadFrame() // fills the buffer exactly
		require.NoError(t, err)
		_, err = r.ReadFrame() // waits, then reads the small frame
		require.NoError(t, err)
		require.Equal(t, initialBufferSize, r.BufferSize())
	})
}
