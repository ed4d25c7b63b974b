package transport

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The buffered pipe behaves as a net.Conn: writes return before the
// reader reads (up to the buffer), a larger write waits for the reader,
// deadlines end a wait with os.ErrDeadlineExceeded, and Close lets the
// peer read what is buffered, then EOF, while its writes fail.
func TestBufPipe(t *testing.T) {
	a, b := bufPipe()
	n, err := a.Write([]byte("hello"))
	require.NoError(t, err)
	require.Equal(t, 5, n, "returned before any read")

	big := bytes.Repeat([]byte("x"), 3*pipeBuffer)
	wrote := make(chan error, 1)
	go func() {
		_, err := a.Write(big)
		wrote <- err
	}()
	got := make([]byte, 0, len(big)+5)
	buf := make([]byte, 64<<10)
	for len(got) < len(big)+5 {
		n, err := b.Read(buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	require.NoError(t, <-wrote)
	require.Equal(t, append([]byte("hello"), big...), got)

	require.NoError(t, b.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
	_, err = b.Read(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, b.SetReadDeadline(time.Time{}))

	_, err = a.Write([]byte("last"))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	n, err = b.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "last", string(buf[:n]))
	_, err = b.Read(buf)
	require.ErrorIs(t, err, io.EOF)
	_, err = b.Write([]byte("to nobody"))
	require.ErrorIs(t, err, io.ErrClosedPipe)
	_, err = a.Read(buf)
	require.ErrorIs(t, err, io.ErrClosedPipe)
}

// A reader waiting for bytes wakes when a deadline set meanwhile passes.
func TestBufPipeDeadlineSetWhileWaiting(t *testing.T) {
	a, b := bufPipe()
	defer a.Close()
	done := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 8))
		done <- err
	}()
	require.NoError(t, b.SetReadDeadline(time.Now().Add(-time.Second)))
	require.ErrorIs(t, <-done, os.ErrDeadlineExceeded)
}
