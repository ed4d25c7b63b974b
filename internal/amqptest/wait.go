package amqptest

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// Timeout bounds every wait of the helpers (a delivery, a confirm, a
// server-sent close, a polled condition). It is generous on purpose: it
// only decides how long a broken test hangs, never whether a working one
// passes.
const Timeout = 10 * time.Second

// IdleTimeout bounds Idle: longer than Timeout because WaitIdle waits for
// all the work a broker has in hand rather than one event. Like Timeout it
// only decides how long a broken test hangs.
const IdleTimeout = 30 * time.Second

// Idle calls waitIdle (a broker's WaitIdle) with a context that expires
// after IdleTimeout and requires it to return nil: afterwards the broker
// has handled everything its clients sent.
func Idle(tb testing.TB, waitIdle func(context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), IdleTimeout)
	defer cancel()
	require.NoError(tb, waitIdle(ctx))
}

// Receive waits up to Timeout for a value on c and returns it and whether
// c was still open; it fails the test if nothing arrives.
func Receive[T any](tb testing.TB, c <-chan T) (T, bool) {
	tb.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case v, ok := <-c:
		return v, ok
	case <-timer.C:
		require.FailNow(tb, "nothing received", "within %s", Timeout)
		var zero T
		return zero, false
	}
}

// Next receives one delivery from msgs; it fails the test if msgs is
// closed or nothing arrives within Timeout.
func Next(tb testing.TB, msgs <-chan amqp091.Delivery) amqp091.Delivery {
	tb.Helper()
	d, ok := Receive(tb, msgs)
	require.True(tb, ok, "delivery channel closed")
	return d
}

// AwaitClose waits for the server to close what errs was registered on
// (with NotifyClose on a channel or a connection) and returns the error it
// sent; a close without an error fails the test.
func AwaitClose(tb testing.TB, errs <-chan *amqp091.Error) *amqp091.Error {
	tb.Helper()
	e, ok := Receive(tb, errs)
	require.True(tb, ok, "closed without an error")
	require.NotNil(tb, e, "closed without an error")
	return e
}

// Poll calls cond until it reports true, sleeping a millisecond between
// calls, and fails the test with format and args if it has not within
// Timeout. It is for effects the broker applies asynchronously (a
// basic.ack has no reply); args are formatted only on failure, so a
// pointer shows the last value cond saw.
func Poll(tb testing.TB, cond func() bool, format string, args ...any) {
	tb.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNowf(tb, "condition never held within "+Timeout.String(), format, args...)
		}
		time.Sleep(time.Millisecond)
	}
}

// CheckGoroutines fails the test if goroutines started during it are still
// running after its other cleanups (so call it first). Goroutines wind down
// asynchronously after Close (amqp091-go's, the runtime's timer
// callbacks), hence the wait of up to five seconds; a leak shows up as a
// count that never returns. This is goleak's idea for one test; a package
// can also run goleak.VerifyTestMain after all of them.
func CheckGoroutines(tb testing.TB) {
	tb.Helper()
	before := runtime.NumGoroutine()
	tb.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				tb.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// ClosedTimeout bounds WaitClosed: twice Timeout, so that a server's own
// timeouts of a few seconds fit in it many times.
const ClosedTimeout = 2 * Timeout

// WaitClosed reads c until the server closes it (EOF, or a reset when it
// closed with bytes unread), failing the test if that takes longer than
// ClosedTimeout.
func WaitClosed(tb testing.TB, c net.Conn) {
	tb.Helper()
	require.NoError(tb, c.SetReadDeadline(time.Now().Add(ClosedTimeout)))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	require.False(tb, errors.As(err, &ne) && ne.Timeout(), "the server never closed the connection")
}
