package conns_test

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/conns"
	"github.com/warrenmq/broker/internal/session"
)

var errClosed = errors.New("closed")

func newSet(t *testing.T) (*conns.Set, chan struct{}) {
	t.Helper()
	quit := make(chan struct{})
	cfg := &session.Config{Counters: &session.Counters{}, Logger: slog.New(slog.DiscardHandler)}
	return conns.New(cfg, slog.New(slog.DiscardHandler), quit, errClosed), quit
}

// TestServeAndClose serves a TCP connection in the background, sees it in
// the set, and checks Close hands back the listener and the connection and
// that Wait returns once both are closed.
func TestServeAndClose(t *testing.T) {
	s, quit := newSet(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr, err := s.ServeInBackground(l, "stopped")
	require.NoError(t, err)
	require.Equal(t, addr, s.Addr())
	require.Len(t, s.TCPAddrs(), 1)

	nc, err := net.Dial("tcp", addr.String())
	require.NoError(t, err)
	defer nc.Close()
	require.Eventually(t, func() bool { return len(s.Sorted()) == 1 }, 10*time.Second, time.Millisecond)
	c := s.Sorted()[0]
	require.Contains(t, s.ByID(), c.ID())

	ls, cs := s.Close()
	close(quit)
	require.Equal(t, []net.Listener{l}, ls)
	require.Equal(t, []*session.Conn{c}, cs)
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	require.NoError(t, nc.Close())
	s.Wait()
	require.Empty(t, s.List(), "a connection that ended leaves the set")
}

// TestClosedRefuses checks that every way in answers the closed error, or
// false, once the set is closed, and closes what it was handed.
func TestClosedRefuses(t *testing.T) {
	s, _ := newSet(t)
	s.Refuse()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.ErrorIs(t, s.Serve(l), errClosed)
	_, err = l.Accept()
	require.Error(t, err, "Serve closes a listener it refuses")

	l2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, err = s.ServeInBackground(l2, "stopped")
	require.ErrorIs(t, err, errClosed)

	server, client := net.Pipe()
	require.False(t, s.ServeConn(server, "pipe#1", false))
	_, err = client.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "ServeConn closes a connection it refuses")

	require.False(t, s.Go(func() { t.Error("ran after Close") }))
	s.Wait()
}

// TestRefuseEndsAcceptLoop checks that Refuse closes the listeners and that
// the accept loop then ends with the closed error, not the accept error.
func TestRefuseEndsAcceptLoop(t *testing.T) {
	s, _ := newSet(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	require.Eventually(t, func() bool { return s.Addr() != nil }, 10*time.Second, time.Millisecond)
	s.Refuse()
	require.ErrorIs(t, <-done, errClosed)
	require.Empty(t, s.TCPAddrs(), "the loop forgets its listener")
}

// TestGoCounts checks that Wait waits for a goroutine started by Go.
func TestGoCounts(t *testing.T) {
	s, _ := newSet(t)
	release := make(chan struct{})
	ended := false
	require.True(t, s.Go(func() { <-release; ended = true }))
	s.Close()
	close(release)
	s.Wait()
	require.True(t, ended)
}
