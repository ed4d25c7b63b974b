package capability

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type byEmbedding struct{ io.Reader }

type byName struct{ r io.Reader }

func (n byName) Read(p []byte) (int, error) { return n.r.Read(p) }

type twice struct {
	*byEmbedding
	extra int
}

func TestEmbedded(t *testing.T) {
	inner := strings.NewReader("x")
	loop := &byEmbedding{}
	loop.Reader = loop
	tests := []struct {
		name string
		v    any
		want []io.Reader
	}{
		{"plain", inner, nil},
		{"embedded", byEmbedding{inner}, []io.Reader{inner}},
		{"pointer", &byEmbedding{inner}, []io.Reader{inner}},
		{"named field", byName{inner}, nil},
		{"nil embedded", byEmbedding{}, nil},
		{"nested", &byEmbedding{byEmbedding{inner}}, []io.Reader{byEmbedding{inner}, inner}},
		{"through an unexported embedded struct", twice{byEmbedding: &byEmbedding{inner}}, []io.Reader{inner}},
		{"nil pointer", (*byEmbedding)(nil), nil},
		{"cycle", loop, []io.Reader{loop}},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Embedded[io.Reader](tt.v))
		})
	}
}

// TestDeclared: what a store offers is compared with what its suite was
// told it lacks, each disagreement named.
func TestDeclared(t *testing.T) {
	caps := []Capability[io.Reader]{
		{Name: "io.Closer", Without: "nothing is closed", Has: Is[io.Closer, io.Reader]},
		{Name: "io.WriterTo", Without: "reads are copied", Has: Is[io.WriterTo, io.Reader]},
	}
	both := io.Reader(&strings.Reader{}) // a WriterTo, not a Closer
	cases := []struct {
		name    string
		without []string
		want    []string
	}{
		{"exactly declared", []string{"io.Closer"}, nil},
		{"lacks one not declared", nil, []string{"*strings.Reader does not implement io.Closer (without it nothing is closed); if it is not meant to, pass suite.Without(\"io.Closer\") (a wrapper that embeds a store loses it: see pkg.Wrap)"}},
		{"has one declared missing", []string{"io.Closer", "io.WriterTo"}, []string{`*strings.Reader implements io.WriterTo but the test says Without("io.WriterTo")`}},
		{"unknown name", []string{"io.Closer", "io.Seeker"}, []string{`Without("io.Seeker"): no such capability`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Declared(caps, both, tc.without, "suite", "pkg.Wrap"))
		})
	}
}
