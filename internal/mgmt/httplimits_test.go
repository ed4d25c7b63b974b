package mgmt_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/mgmt"
)

// serveLimited serves the management API and metrics of b on loopback
// with lim, stopped on cleanup; it returns the address.
func serveLimited(t *testing.T, b *broker.Broker, lim broker.HTTPLimits) string {
	t.Helper()
	addr, _ := serveLimitedListener(t, b, lim)
	return addr
}

// serveLimitedListener is serveLimited that also returns the limiting
// listener, for waitIdle.
func serveLimitedListener(t *testing.T, b *broker.Broker, lim broker.HTTPLimits) (string, net.Listener) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/api/", b.ManagementHandler())
	mux.Handle("/metrics", b.MetricsHandler(broker.MetricsOptions{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := lim.Server(mux)
	limited := lim.Listener(ln)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(limited) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return ln.Addr().String(), limited
}

// waitIdle waits until ln holds at least anonymous idle connections that
// never logged in and loggedIn idle ones that did.
func waitIdle(t *testing.T, ln net.Listener, anonymous, loggedIn int) {
	t.Helper()
	amqptest.Poll(t, func() bool {
		a, l := mgmt.IdleConnections(ln)
		return a >= anonymous && l >= loggedIn
	}, "%d anonymous and %d logged-in idle connections", anonymous, loggedIn)
}

// rawGet sends one complete request on c and reads the response status.
func rawGet(t *testing.T, c net.Conn, path string) int {
	t.Helper()
	_, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n", path)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHTTPTimeoutsCloseStalledConnections: every way of holding an HTTP
// connection without finishing with it (connected and silent, headers
// half sent, body half sent, keep-alive after a response) ends with the
// server closing it once its timeout passes. With http.Server's zero
// timeouts they stayed open for ever.
func TestHTTPTimeoutsCloseStalledConnections(t *testing.T) {
	b := mgmtBroker(t)
	addr := serveLimited(t, b, broker.HTTPLimits{
		ReadHeaderTimeout: 100 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: time.Second, IdleTimeout: 300 * time.Millisecond,
	})
	for _, tc := range []struct {
		name string
		send string
	}{
		{"silent", ""},
		{"half a header", "GET /api/overview HTTP/1.1\r\nHost: x\r\nX-Slow: "},
		{"half a body", "POST /api/definitions HTTP/1.1\r\nHost: x\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n" +
			"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"queues\":["},
		{"keep-alive after a response", "keepalive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			if tc.send == "keepalive" {
				require.Equal(t, 200, rawGet(t, c, "/api/overview"))
			} else if tc.send != "" {
				_, err = io.WriteString(c, tc.send)
				require.NoError(t, err)
			}
			amqptest.WaitClosed(t, c)
		})
	}
}

// TestHTTPConnectionLimit: beyond MaxConnections, with every slot busy
// (each holding a request whose headers are still arriving), a connection
// is closed unserved while AMQP goes on accepting; a slot freed is usable
// again.
func TestHTTPConnectionLimit(t *testing.T) {
	const limit = 4
	b := mgmtBroker(t)
	amqpAddr, err := b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	// Timeouts far longer than amqptest.WaitClosed waits: only the limit
	// closes the flood.
	addr := serveLimited(t, b, broker.HTTPLimits{MaxConnections: limit, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute})

	var held []net.Conn
	for range limit {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET /api/overview HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		require.NoError(t, err)
		held = append(held, c)
	}
	var flood []net.Conn
	for range 50 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		flood = append(flood, c)
	}
	for _, c := range flood {
		amqptest.WaitClosed(t, c) // over the limit: closed without a byte
	}

	conn, err := amqp091.DialConfig("amqp://guest:guest@"+amqpAddr.String()+"/", amqp091.Config{Dial: amqp091.DefaultDial(10 * time.Second)})
	require.NoError(t, err, "AMQP still accepts during the flood")
	require.NoError(t, conn.Close())

	require.NoError(t, held[0].Close())
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		status, err := roundTrip(c, "/metrics", false)
		return err == nil && status == 200
	}, 20*time.Second, 10*time.Millisecond, "a closed connection gives its slot back")
}

// dialFrom connects to addr from the loopback address ip (Linux routes
// all of 127.0.0.0/8 to lo), so one test can be many sources.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip sends one GET of path on c, with guest's credentials when
// login is set, and reads the response's status; an error when the server
// closed c instead.
func roundTrip(c net.Conn, path string, login bool) (int, error) {
	auth := ""
	if login {
		auth = "Authorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n"
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", path, auth); err != nil {
		return 0, err
	}
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// requireStatus sends one GET of path on c (logged in as guest when login
// is set) and requires the server to answer it with want.
func requireStatus(t *testing.T, c net.Conn, path string, login bool, want int, msgAndArgs ...any) {
	t.Helper()
	status, err := roundTrip(c, path, login)
	require.NoError(t, err, msgAndArgs...)
	require.Equal(t, want, status, msgAndArgs...)
}

// closedByServer reports whether the server has closed c: a read ends
// with EOF or a reset rather than waiting. Run after whatever closed it
// has answered, the FIN is already there on loopback.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// countOpen is how many of cs the server still holds, probed at once.
func countOpen(cs []net.Conn) int {
	var open atomic.Int64
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			if !closedByServer(c) {
				open.Add(1)
			}
		})
	}
	wg.Wait()
	return int(open.Load())
}

// adminClient is an HTTP client whose connections come from the loopback
// address ip.
func adminClient(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestHTTPOneSourceCannotLockOutAdmins: one client holding 300 sockets
// without logging in, silent or kept alive after a 401, gets its share of
// the default limits (an eighth of 256), and an administrator's request
// from another address is served while it holds them. Before the share,
// the 300 took all 256 slots and every other request was reset until the
// client let go. Its own address is not locked out either: a request
// that logs in takes the place of one of the client's idle sockets.
func TestHTTPOneSourceCannotLockOutAdmins(t *testing.T) {
	const sockets, share = 300, 256 / 8
	for _, keepAlive := range []bool{false, true} {
		t.Run(map[bool]string{false: "silent", true: "kept alive after a 401"}[keepAlive], func(t *testing.T) {
			b := mgmtBroker(t)
			addr, ln := serveLimitedListener(t, b, broker.HTTPLimits{}) // the defaults
			flood := make([]net.Conn, sockets)
			for i := range flood {
				flood[i] = dialFrom(t, "127.0.0.1", addr)
				if keepAlive {
					if status, err := roundTrip(flood[i], "/api/overview", false); err == nil {
						require.Equal(t, http.StatusUnauthorized, status)
					}
				}
			}

			get := func(client *http.Client) {
				t.Helper()
				req, err := http.NewRequest("GET", "http://"+addr+"/api/overview", nil)
				require.NoError(t, err)
				req.SetBasicAuth("guest", "guest")
				resp, err := client.Do(req)
				require.NoError(t, err, "the administrator's request was refused")
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			other := adminClient("127.0.0.2")
			defer other.CloseIdleConnections()
			get(other)
			require.LessOrEqual(t, countOpen(flood), share, "the flooding source holds more than its share")

			// From the flooding address itself, once one of its sockets
			// is idle: a silent one a second after it was accepted, a
			// kept-alive one as soon as its answer is written.
			waitIdle(t, ln, 1, 0)
			same := adminClient("127.0.0.1")
			defer same.CloseIdleConnections()
			get(same)
		})
	}
}

// TestHTTPReclaimsIdleConnections: with every slot taken, a new
// connection takes the place of an idle one, chosen so that a flood
// makes room from itself first: anonymous keep-alives of the source that
// holds the most of them, else the logged-in keep-alive idle longest.
// Idle sockets used to keep every slot until their idle timeout, and the
// newcomer was closed.
func TestHTTPReclaimsIdleConnections(t *testing.T) {
	t.Run("anonymous, from the biggest holder", func(t *testing.T) {
		b := mgmtBroker(t)
		addr, ln := serveLimitedListener(t, b, broker.HTTPLimits{MaxConnections: 6, MaxUnauthenticatedPerSource: 3, IdleTimeout: time.Minute})
		var anon []net.Conn
		for _, ip := range []string{"127.0.0.3", "127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"} {
			c := dialFrom(t, ip, addr)
			requireStatus(t, c, "/api/overview", false, http.StatusUnauthorized)
			anon = append(anon, c)
			waitIdle(t, ln, len(anon), 0) // idle in this order, so "oldest" is known
		}
		c := dialFrom(t, "127.0.0.9", addr)
		requireStatus(t, c, "/api/overview", true, http.StatusOK, "the newcomer was refused")
		for i, c := range anon {
			require.Equal(t, i == 1, closedByServer(c), "socket %d: only 127.0.0.1's oldest makes room", i)
		}
	})
	t.Run("logged in, idle longest", func(t *testing.T) {
		b := mgmtBroker(t)
		addr, ln := serveLimitedListener(t, b, broker.HTTPLimits{MaxConnections: 3, IdleTimeout: time.Minute})
		var held []net.Conn
		for range 3 {
			c := dialFrom(t, "127.0.0.1", addr)
			requireStatus(t, c, "/api/overview", true, http.StatusOK)
			held = append(held, c)
			waitIdle(t, ln, 0, len(held))
		}
		// The first is used again, so the second has been idle longest.
		requireStatus(t, held[0], "/api/overview", true, http.StatusOK)
		waitIdle(t, ln, 0, len(held))
		c := dialFrom(t, "127.0.0.2", addr)
		requireStatus(t, c, "/api/whoami", true, http.StatusOK, "the newcomer was refused")
		for i, c := range held {
			require.Equal(t, i == 1, closedByServer(c), "connection %d", i)
		}
	})
	t.Run("a source at its share makes room from itself", func(t *testing.T) {
		b := mgmtBroker(t)
		addr, ln := serveLimitedListener(t, b, broker.HTTPLimits{MaxConnections: 100, MaxUnauthenticatedPerSource: 2, IdleTimeout: time.Minute})
		busy := func() net.Conn { // headers still arriving: not idle
			c := dialFrom(t, "127.0.0.1", addr)
			_, err := io.WriteString(c, "GET /api/overview HTTP/1.1\r\nHost: x\r\nX-Slow: ")
			require.NoError(t, err)
			return c
		}
		busy1 := busy()
		idle := dialFrom(t, "127.0.0.1", addr)
		requireStatus(t, idle, "/api/overview", false, http.StatusUnauthorized)
		waitIdle(t, ln, 1, 0)

		// The share is full (busy1, idle): a third takes idle's place.
		in := dialFrom(t, "127.0.0.1", addr)
		requireStatus(t, in, "/api/overview", true, http.StatusOK, "refused although the source had an idle anonymous connection")
		require.True(t, closedByServer(idle), "the idle anonymous connection made room")
		require.False(t, closedByServer(busy1), "a busy connection was closed")

		// Logged in, in left the share: another anonymous one fits. Then
		// the share is full of busy connections, and the next is closed
		// unserved; in, logged in and idle, is not taken for it.
		busy2 := busy()
		require.False(t, closedByServer(busy2))
		waitIdle(t, ln, 0, 1)
		amqptest.WaitClosed(t, dialFrom(t, "127.0.0.1", addr))
		require.False(t, closedByServer(in), "a logged-in connection made room for an anonymous one of its source")
		c := dialFrom(t, "127.0.0.2", addr)
		requireStatus(t, c, "/api/overview", false, http.StatusUnauthorized, "another source is refused")
	})
}
