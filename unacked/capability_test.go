package unacked

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

type claiming struct{ Index }

func (claiming) Claim(context.Context, Claim) (bool, error) { return true, nil }

type plain struct{ Index }

// Wrap keeps the Claimer that embedding hides, and adds none.
func TestWrap(t *testing.T) {
	var c claiming
	require.Equal(t, []string{"unacked.Claimer"}, Hidden(plain{c}))
	require.Equal(t, []string{"unacked.Claimer"}, Lacks(plain{c}))
	w := Wrap(plain{c}, c)
	require.Empty(t, Hidden(w))
	require.Empty(t, Lacks(w))
	require.Equal(t, Index(plain{}), Wrap(plain{}, plain{}))
	require.Equal(t, []string{"unacked.Claimer"}, Lacks(wrapWith(plain{}, nil)))
}
