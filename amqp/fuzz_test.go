package amqp

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// The fuzz targets check that no input panics, that what is accepted round-trips
// (decode, encode, decode, encode: the two encodings are identical), and that the
// allocation-free validators agree with the decoders. Seeds live in
// testdata/fuzz/<Name>/, written from real frames by `go test -run TestWriteFuzzSeeds
// -write-seeds`.

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the fuzz seed corpora in testdata/fuzz")

// readAll reads frames until an error, copying the payloads.
func readAll(r io.Reader, max uint32) ([]Frame, error) {
	fr := NewFrameReader(r)
	fr.SetMaxFrameSize(max)
	if w, ok := r.(IdleWaiter); ok {
		fr.SetIdleWaiter(w)
	}
	var frames []Frame
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return frames, err
		}
		f.Payload = bytes.Clone(f.Payload)
		frames = append(frames, f)
	}
}

// halves serves data in two reads, split in the middle.
type halves struct{ parts [][]byte }

func (h *halves) Read(p []byte) (int, error) {
	for len(h.parts) > 0 && len(h.parts[0]) == 0 {
		h.parts = h.parts[1:]
	}
	if len(h.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, h.parts[0])
	h.parts[0] = h.parts[0][n:]
	return n, nil
}

func FuzzFrameReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, max := range []uint32{0, FrameMinSize} {
			frames, err := readAll(bytes.NewReader(data), max)
			var e *Error
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				require.True(t, errors.As(err, &e), "unexpected error %v", err)
				require.Equal(t, FrameError, e.Code)
			}
			// The same bytes in other read sizes give the same frames and error.
			for name, r := range map[string]io.Reader{
				"one byte": iotest.OneByteReader(bytes.NewReader(data)),
				"halves":   &halves{parts: [][]byte{bytes.Clone(data[:len(data)/2]), bytes.Clone(data[len(data)/2:])}},
				// Thirds with a wait between them, giving the buffer
				// back before each, as an idle socket does.
				"idle thirds":    &idleSource{chunks: thirds(data)},
				"parking thirds": parkingSource{&idleSource{chunks: thirds(data)}},
			} {
				frames2, err2 := readAll(r, max)
				require.Equal(t, frames, frames2, name)
				require.Equal(t, err, err2, name)
			}
			checkBuffered(t, data, max)
			// Frames re-encode to the bytes they came from.
			var enc []byte
			for _, fr := range frames {
				enc = AppendFrame(enc, fr.Type, fr.Channel, fr.Payload)
			}
			require.True(t, bytes.Equal(data[:len(enc)], enc), "frames re-encode to their bytes")
			for _, fr := range frames {
				switch fr.Type {
				case FrameMethod:
					checkMethod(t, fr.Payload)
				case FrameHeader:
					checkHeader(t, fr.Payload)
				}
			}
		}
	})
}

// checkBuffered reads data in thirds and checks FrameBuffered and
// Buffered against what ReadFrame then does: when a whole frame is
// reported buffered, ReadFrame returns it (or a frame error) from the
// buffer alone, reading nothing from the source.
func checkBuffered(t *testing.T, data []byte, max uint32) {
	fr := NewFrameReader(&halves{parts: thirds(data)})
	fr.SetMaxFrameSize(max)
	for {
		buffered, before := fr.FrameBuffered(), fr.Buffered()
		f, err := fr.ReadFrame()
		if !buffered {
			if err != nil {
				return
			}
			continue
		}
		if err != nil {
			var e *Error
			require.True(t, errors.As(err, &e), "a buffered frame fails only as malformed, not %v", err)
			return
		}
		require.Equal(t, before-len(f.Payload)-frameOverhead, fr.Buffered(), "a buffered frame is read without reading")
	}
}

// thirds is data cut in three chunks (the last ones maybe empty).
func thirds(data []byte) [][]byte {
	a, b := len(data)/3, 2*len(data)/3
	return [][]byte{bytes.Clone(data[:a]), bytes.Clone(data[a:b]), bytes.Clone(data[b:])}
}

func FuzzDecodeMethod(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) { checkMethod(t, payload) })
}

func checkMethod(t *testing.T, payload []byte) {
	m, err := DecodeMethod(payload)
	if err != nil {
		var e *Error
		require.True(t, errors.As(err, &e), "unexpected error %v", err)
		require.Contains(t, []uint16{FrameError, SyntaxError, CommandInvalid}, e.Code)
		return
	}
	enc := AppendMethod(nil, m)
	m2, err := DecodeMethod(enc)
	require.NoError(t, err)
	require.Equal(t, enc, AppendMethod(nil, m2))
	// Decoding into a struct that holds other values gives the same result.
	_, _, args, err := MethodIDs(payload)
	require.NoError(t, err)
	require.NoError(t, m2.DecodeArgs(args))
	require.Equal(t, enc, AppendMethod(nil, m2))
}

func checkHeader(t *testing.T, payload []byte) {
	h, err := ParseContentHeader(payload)
	if err != nil {
		requireCode(t, SyntaxError, err)
		return
	}
	checkProperties(t, h.Properties)
}

func FuzzDecodeTable(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		tbl, n, err := DecodeTable(data)
		_, n2, err2 := parseTable(data, 0, false)
		require.Equal(t, err, err2, "validation agrees with decoding")
		require.Equal(t, n, n2)
		if err != nil {
			requireCode(t, SyntaxError, err)
			return
		}
		enc, err := AppendTable(nil, tbl)
		require.NoError(t, err)
		tbl2, n, err := DecodeTable(enc)
		require.NoError(t, err)
		require.Equal(t, len(enc), n)
		enc2, err := AppendTable(nil, tbl2)
		require.NoError(t, err)
		require.Equal(t, enc, enc2)
	})
}

func FuzzProperties(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) { checkProperties(t, raw) })
}

func checkProperties(t *testing.T, raw []byte) {
	p, err := DecodeProperties(raw)
	s, err2 := SummarizeProperties(raw)
	_, err3 := ParseContentHeader(append(make([]byte, 12), raw...))
	require.Equal(t, err == nil, err2 == nil, "summary agrees with decoding: %v %v", err, err2)
	require.Equal(t, err == nil, err3 == nil, "header validation agrees with decoding: %v %v", err, err3)
	if err != nil {
		requireCode(t, SyntaxError, err)
		return
	}
	require.Equal(t, p.DeliveryMode, s.DeliveryMode)
	require.Equal(t, p.Priority, s.Priority)
	require.Equal(t, p.Expiration, s.Expiration)
	require.Equal(t, p.UserID, s.UserID)
	if len(p.Headers) > 0 {
		require.True(t, s.HasHeaders)
	}
	enc := p.Append(nil)
	p2, err := DecodeProperties(enc)
	require.NoError(t, err)
	require.Equal(t, enc, p2.Append(nil))
}

// TestWriteFuzzSeeds writes the seed corpora from real frames when -write-seeds is set.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-seeds to rewrite testdata/fuzz")
	}
	seeds := map[string][][]byte{}
	add := func(target string, b []byte) { seeds[target] = append(seeds[target], bytes.Clone(b)) }

	data, _ := stream()
	add("FuzzFrameReader", data)
	add("FuzzFrameReader", append([]byte("AMQP\x00\x00\x09\x01"), AppendHeartbeatFrame(nil)...))
	add("FuzzFrameReader", AppendFrame(nil, FrameMethod, 0, []byte{0, 10}))
	add("FuzzFrameReader", []byte{1, 0, 1, 0, 0, 0, 0, 0xCD})
	for i, proto := range allMethods() {
		m, err := NewMethod(proto.ClassID(), proto.MethodID())
		require.NoError(t, err)
		fill(t, m, i)
		add("FuzzDecodeMethod", AppendMethod(nil, m))
		if i%8 == 0 {
			add("FuzzFrameReader", AppendMethodFrame(nil, uint16(i), m))
		}
	}
	add("FuzzDecodeMethod", []byte{0, 60, 0, 99})
	for _, tb := range []Table{nil, everyType(), deepTable(maxDepth - 1), {"a": []any{[]any{[]any{}}}}} {
		enc, err := AppendTable(nil, tb)
		require.NoError(t, err)
		add("FuzzDecodeTable", enc)
	}
	all := allProperties()
	all.Headers = everyType()
	for _, p := range []Properties{{}, all, {DeliveryMode: 2}, {Expiration: "1000", UserID: "guest"}, {Headers: Table{"x-match": "any"}}} {
		add("FuzzProperties", p.Append(nil))
		add("FuzzFrameReader", AppendHeaderFrame(nil, 1, ClassBasic, 10, p.Append(nil)))
	}

	for target, inputs := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for i, in := range inputs {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(in)))
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%03d", i)), []byte(content), 0o644))
		}
	}
}
