package raftlink

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// closedSoon reports whether c's other end sees it closed.
func closedSoon(t *testing.T, peer net.Conn) bool {
	t.Helper()
	if err := peer.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return true // net.Pipe: the other end closed
	}
	_, err := peer.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestConnsBoundsHandshakes: past MaxHandshakes the accepted connection
// waiting longest is closed; an authenticated one no longer counts; a
// removed member's connections close with ClosePeer; Close closes the
// rest and refuses new ones.
func TestConnsBoundsHandshakes(t *testing.T) {
	cs := &Conns{MaxHandshakes: 2}
	var mine, theirs []net.Conn
	for range 3 {
		a, b := net.Pipe()
		mine, theirs = append(mine, a), append(theirs, b)
	}
	require.True(t, cs.admit(mine[0]))
	time.Sleep(time.Millisecond) // distinct ages
	require.True(t, cs.admit(mine[1]))
	require.Equal(t, 2, cs.Pending())
	require.True(t, cs.admit(mine[2]))
	require.Equal(t, 2, cs.Pending())
	require.True(t, closedSoon(t, theirs[0]), "the oldest waiting is closed")
	require.False(t, cs.Authenticated(mine[0], 7, func(uint64) bool { return true }), "an evicted connection does not authenticate")

	require.False(t, cs.Authenticated(mine[1], 7, func(uint64) bool { return false }), "not a member")
	require.True(t, cs.Authenticated(mine[1], 7, func(uint64) bool { return true }))
	require.Equal(t, 1, cs.Pending())
	require.False(t, cs.Authenticated(mine[1], 7, func(uint64) bool { return true }), "only once")

	cs.ClosePeer(7)
	require.True(t, closedSoon(t, theirs[1]), "the removed member's connection is closed")

	d1, d2 := net.Pipe()
	require.True(t, cs.Track(d1))
	cs.Close()
	require.True(t, closedSoon(t, d2), "Close closes dialed connections")
	require.True(t, closedSoon(t, theirs[2]), "and accepted ones")
	x, _ := net.Pipe()
	require.False(t, cs.Track(x))
	require.False(t, cs.admit(x))
	cs.Untrack(mine[2])
	require.Zero(t, cs.Pending())
}

// TestConnsAccept runs the accept loop on a loopback listener: every
// connection reaches handle on its own goroutine, and the loop ends when
// the listener closes.
func TestConnsAccept(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cs := &Conns{MaxHandshakes: 4}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	got := make(chan net.Conn, 4)
	loop := make(chan struct{})
	go func() {
		defer close(loop)
		cs.Accept(l, nil, stop, &wg, func(c net.Conn) { got <- c })
	}()
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		select {
		case s := <-got:
			require.True(t, cs.Authenticated(s, 1, func(uint64) bool { return true }))
			cs.Untrack(s)
		case <-time.After(10 * time.Second):
			t.Fatal("no connection handed over")
		}
	}
	require.Zero(t, cs.Pending())
	require.NoError(t, l.Close())
	<-loop
	wg.Wait()
	close(stop)
}

func TestCheckTransport(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	require.Empty(t, CheckTransport("x", l, 1, make([]byte, 16), 16, nil, nil, false))
	require.Len(t, CheckTransport("x", nil, 0, make([]byte, 16), 16, nil, nil, false), 2, "a listener and an id")
	require.Len(t, CheckTransport("x", l, 1, make([]byte, 15), 16, nil, nil, false), 1)
	require.Len(t, CheckTransport("x", l, 1, nil, 16, nil, nil, false), 1, "no way to authenticate")
	require.Empty(t, CheckTransport("x", l, 1, nil, 16, nil, nil, true))
	require.Len(t, CheckTransport("x", l, 1, make([]byte, 16), 16, nil, nil, true), 1, "insecure excludes a secret")
}
