package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpecUpToDate regenerates amqp/spec.go in memory and compares it byte for byte
// with the committed file, so an edit to the generator or the XML cannot be forgotten.
func TestSpecUpToDate(t *testing.T) {
	xmlBytes, err := os.ReadFile(specName)
	require.NoError(t, err)
	want, err := Generate(xmlBytes)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "..", "amqp", "spec.go"))
	require.NoError(t, err)
	if !bytes.Equal(want, got) {
		t.Fatalf("amqp/spec.go is stale: run `go generate ./amqp` (generated %d bytes, committed %d)", len(want), len(got))
	}
}

func TestCamel(t *testing.T) {
	for in, want := range map[string]string{
		"routing-key":       "RoutingKey",
		"reserved-1":        "Reserved1",
		"no-ack":            "NoAck",
		"server-properties": "ServerProperties",
		"version-major":     "VersionMajor",
		"nowait":            "Nowait",
		"update-secret-ok":  "UpdateSecretOk",
		"frame-min-size":    "FrameMinSize",
	} {
		require.Equal(t, want, camel(in), in)
	}
}

func TestGenerateRejectsBadSpecs(t *testing.T) {
	for name, xml := range map[string]string{
		"not xml":        "<amqp",
		"unknown domain": `<amqp><class name="c" index="1"><method name="m" index="1"><field name="f" domain="nope"/></method></class></amqp>`,
		"unknown type":   `<amqp><class name="c" index="1"><method name="m" index="1"><field name="f" type="float"/></method></class></amqp>`,
		"bad reply code": `<amqp><constant name="reply-huge" value="70000" class="soft-error"/></amqp>`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Generate([]byte(xml))
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "gen: "), err.Error())
		})
	}
}

// TestBitPacking checks the generated code for more than eight consecutive bits, which
// the real spec never has: the ninth starts a new octet (§4.2.5.2).
func TestBitPacking(t *testing.T) {
	var fields strings.Builder
	for i := range 9 {
		fields.WriteString(`<field name="b` + string(rune('a'+i)) + `" type="bit"/>`)
	}
	src, err := Generate([]byte(`<amqp><class name="c" index="1"><method name="m" index="1">` + fields.String() + `</method></class></amqp>`))
	require.NoError(t, err)
	s := string(src)
	require.Equal(t, 2, strings.Count(s, "dst = append(dst, bits)"))
	require.Contains(t, s, "m.Bi = bits&(1<<0) != 0")
	require.Contains(t, s, "m.Bh = bits&(1<<7) != 0")
}
