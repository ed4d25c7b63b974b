package brokertest_test

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// notFaults are the exported methods of Lab and Link that make no fault
// happen (connecting, addresses, the broker behind), so the cookbook need
// not show them.
var notFaults = map[string]bool{
	"Lab.Broker": true, "Lab.Dial": true, "Lab.DialAMQP": true, "Lab.Net": true,
	"Lab.NewLink": true, "Lab.URL": true, "Lab.WaitIdle": true,
	"Link.Broker": true, "Link.Dial": true, "Link.DialAMQP": true, "Link.URL": true,
}

// TestDocIsACookbook: `go doc ./brokertest` prints the package comment but
// never the Example functions, so the comment itself carries the cookbook:
// every fault method of Lab and Link (and each observation a test asserts
// with) is called in one of its code blocks, and every code block parses
// as Go statements. A fault added without a line there fails here.
func TestDocIsACookbook(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", nil, parser.ParseComments)
	require.NoError(t, err)
	src := pkgs["brokertest"]
	require.NotNil(t, src)
	var files []*ast.File
	for _, f := range src.Files {
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/warrenmq/broker/brokertest")
	require.NoError(t, err)

	var code strings.Builder
	blocks := 0
	for _, b := range new(comment.Parser).Parse(p.Doc).Content {
		cb, ok := b.(*comment.Code)
		if !ok {
			continue
		}
		blocks++
		code.WriteString(cb.Text)
		// Statements or declarations: parse inside a function body, or as
		// a file when the block is a whole function.
		_, errStmt := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+cb.Text+"\n}", 0)
		_, errDecl := parser.ParseFile(token.NewFileSet(), "", "package p\n"+cb.Text, 0)
		require.Truef(t, errStmt == nil || errDecl == nil, "a code block of the package comment does not parse: %v\n%s", errStmt, cb.Text)
	}
	require.Greater(t, blocks, 1, "the package comment has code blocks")

	for _, typ := range p.Types {
		if typ.Name != "Lab" && typ.Name != "Link" {
			continue
		}
		for _, m := range typ.Methods {
			key := typ.Name + "." + m.Name
			if notFaults[key] {
				continue
			}
			require.Containsf(t, code.String(), "."+m.Name+"(", "the package comment has no example calling %s", key)
		}
	}
	for _, f := range []string{"WaitQueue(", "Ready(", "Unacked(", "Consumers(", "Trace()"} {
		require.Containsf(t, code.String(), f, "the package comment has no example of %s", f)
	}
}
