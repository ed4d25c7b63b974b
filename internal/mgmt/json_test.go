package mgmt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteJSONStringBody: the streaming string encoder reads back as
// what encoding/json would have written.
func TestWriteJSONStringBody(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" back \\ slash", "\x00\x01\x1f\t\r\n", "é ☃ 🐇", "\u2028\u2029x", "<&>"} {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		w.WriteByte('"')
		writeJSONStringBody(w, []byte(s))
		w.WriteByte('"')
		require.NoError(t, w.Flush())
		var back string
		require.NoError(t, json.Unmarshal(buf.Bytes(), &back), "%q", buf.String())
		require.Equal(t, s, back)
		want, _ := json.Marshal(s)
		require.Equal(t, strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(want)), buf.String())
	}
}
