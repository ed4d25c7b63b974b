package session

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSessionLeavesIOAndStorageAtTheEdge: the protocol state machine does
// no socket I/O of its own (internal/transport does, with syscall and
// unsafe) and names no storage type (the queue package gives it Record
// and ErrOutcomeUnknown).
func TestSessionLeavesIOAndStorageAtTheEdge(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	forbidden := map[string]bool{
		"syscall":                            true,
		"unsafe":                             true,
		"github.com/warrenmq/broker/storage": true,
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			require.False(t, forbidden[path], "%s imports %s", name, path)
		}
	}
}
