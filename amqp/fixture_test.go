package amqp

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the decoded sections of testdata/*.txt fixtures")

// fixture is one block of a fixture file: comments, hex input, "----", expected output.
type fixture struct {
	comments []string
	hexLines []string
	want     string
}

func parseFixtures(t *testing.T, path string) (header []string, fixtures []fixture) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	blocks := strings.Split(strings.TrimSpace(string(raw)), "\n\n\n")
	header = strings.Split(blocks[0], "\n")
	for _, block := range blocks[1:] {
		in, want, ok := strings.Cut(block, "----\n")
		if !ok {
			in, want = strings.TrimSuffix(block, "----"), ""
		}
		var f fixture
		for _, line := range strings.Split(strings.TrimSpace(in), "\n") {
			if strings.HasPrefix(line, "#") {
				f.comments = append(f.comments, line)
			} else if line != "" {
				f.hexLines = append(f.hexLines, line)
			}
		}
		f.want = strings.TrimSpace(want)
		fixtures = append(fixtures, f)
	}
	return header, fixtures
}

// describe decodes one frame (or the protocol header) the way the session would, and
// checks on the way that re-encoding what was decoded decodes to the same thing.
func describe(t *testing.T, in []byte) string {
	if bytes.HasPrefix(in, []byte("AMQP")) {
		h, err := NewFrameReader(bytes.NewReader(in)).ReadProtocolHeader()
		require.NoError(t, err)
		return fmt.Sprintf("protocol header %q %d-%d-%d", h[:4], h[5], h[6], h[7])
	}
	fr := NewFrameReader(bytes.NewReader(in))
	f, err := fr.ReadFrame()
	if err != nil {
		return "error: " + err.Error()
	}
	switch f.Type {
	case FrameMethod:
		m, err := DecodeMethod(f.Payload)
		if err != nil {
			return "error: " + err.Error()
		}
		again, err := DecodeMethod(AppendMethod(nil, m))
		require.NoError(t, err)
		require.Equal(t, m, again)
		return fmt.Sprintf("channel %d %s %+v", f.Channel, m.Name(), m)
	case FrameHeader:
		h, err := ParseContentHeader(f.Payload)
		if err != nil {
			return "error: " + err.Error()
		}
		p, err := DecodeProperties(h.Properties)
		require.NoError(t, err)
		again, err := DecodeProperties(p.Append(nil))
		require.NoError(t, err)
		require.Equal(t, p, again)
		return fmt.Sprintf("channel %d header class %d body-size %d %+v", f.Channel, h.ClassID, h.BodySize, p)
	}
	return fmt.Sprintf("channel %d type %d payload %q", f.Channel, f.Type, f.Payload)
}

// printable escapes control characters so fixture files stay text.
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestClientFrames decodes frames captured from the amqp091-go client: an encoder
// other than ours, with its own table key order.
func TestClientFrames(t *testing.T) {
	const path = "testdata/client_frames.txt"
	header, fixtures := parseFixtures(t, path)
	var out strings.Builder
	out.WriteString(strings.Join(header, "\n"))
	for i, f := range fixtures {
		in, err := hex.DecodeString(strings.NewReplacer(" ", "", "\t", "").Replace(strings.Join(f.hexLines, "")))
		require.NoError(t, err, "block %d", i)
		got := printable(describe(t, in))
		if !*rewrite {
			require.Equal(t, f.want, got, "block %d: %s", i, strings.Join(f.comments, " "))
		}
		fmt.Fprintf(&out, "\n\n\n%s\n%s\n----\n%s", strings.Join(f.comments, "\n"), strings.Join(f.hexLines, "\n"), got)
	}
	if *rewrite {
		require.NoError(t, os.WriteFile(path, []byte(out.String()+"\n"), 0o644))
	}
}
