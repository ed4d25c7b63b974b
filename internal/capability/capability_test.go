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
