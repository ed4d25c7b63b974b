package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	require.Equal(t, "hello, Ada (delivery 1)\nhello, Grace (delivery 2)\nhello, Edsger (delivery 3)\n", out.String())
}
