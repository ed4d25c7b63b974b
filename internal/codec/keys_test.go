package codec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSuccessor(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{[]byte("mq"), []byte("mr")},
		{[]byte{'m', 0xff}, []byte{'n'}},
		{[]byte{0xff, 0xff}, nil},
	} {
		require.Equal(t, tc.want, Successor(tc.in))
	}
}
