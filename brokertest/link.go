package brokertest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
)

// Link is a network path between some clients and a Lab's broker: a
// socket-free door (Dial) and a TCP port of its own (URL), both in front
// of whichever broker runs, and the network faults applied to every
// connection through it. Give the clients whose network should misbehave
// a Link of their own (Lab.NewLink) and the others the default one
// (Lab.Net).
//
// Faults act on connections already open and on new ones:
//
//   - Latency delays every read and write by d (each way);
//   - Bandwidth caps each connection's throughput each way;
//   - BlackHole stops bytes both ways without closing anything, as a
//     dropped route does: writes on the open connections still return
//     (the socket takes the bytes) but nothing arrives, ever (the
//     heartbeats or a timeout have to notice); new connections wait to
//     connect until Heal;
//   - Partition holds bytes both ways until Heal, which delivers them, as
//     TCP's retransmission does after a partition heals in time (small
//     writes return at once, as into a socket's send buffer);
//   - ResetAfter lets n more bytes through each connection, then resets it
//     (a TCP RST, no connection.close).
type Link struct {
	lab  *Lab
	name string

	mu        sync.Mutex
	latency   time.Duration
	bandwidth int64         // bytes per second; 0 unlimited
	held      chan struct{} // non-nil while partitioned or black-holed: closed by Heal
	holeEpoch int           // connections opened before the epoch's black hole stay stalled
	hole      bool
	reset     int64 // ResetAfter's n for connections; 0 off
	conns     map[*faultConn]struct{}
	ln        net.Listener
	seq       int
	stopped   bool
}

// NewLink returns a new Link to the Lab's broker, with no faults.
func (l *Lab) NewLink(name string) *Link {
	return l.newLink(name)
}

func (l *Lab) newLink(name string) *Link {
	k := &Link{lab: l, name: name, conns: make(map[*faultConn]struct{})}
	l.mu.Lock()
	l.links = append(l.links, k)
	l.mu.Unlock()
	return k
}

// Dial connects to the Lab's broker through b.Dial, the socket-free door,
// with the Link's faults. It fits amqp091.Config.Dial; network and addr
// are ignored.
func (k *Link) Dial(network, addr string) (net.Conn, error) {
	if !k.waitOpen() {
		return nil, net.ErrClosed
	}
	b, _ := k.lab.current()
	if b == nil {
		return nil, errors.New("brokertest: connection refused: the broker is down")
	}
	nc, err := b.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	return k.wrap(nc, true), nil
}

// DialAMQP connects amqp091-go through the Link's socket-free door,
// naming the connection name (its client-provided connection_name,
// unless ""). The connection is closed by t.Cleanup.
func (k *Link) DialAMQP(t testing.TB, name string) *amqp091.Connection {
	t.Helper()
	cfg := amqp091.Config{Dial: k.Dial, Properties: amqp091.Table{}}
	if name != "" {
		cfg.Properties.SetClientConnectionName(name)
	}
	conn, err := amqp091.DialConfig(k.lab.urlFor("127.0.0.1:5672"), cfg)
	if err != nil {
		t.Fatalf("brokertest: dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// URL returns an AMQP URI for the Link's TCP port on 127.0.0.1, with the
// broker's first user: the port is the Link's, opened on first use, and
// stays the same across Restart and Crash.
func (k *Link) URL() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ln == nil && !k.stopped {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(fmt.Sprintf("brokertest: link %s: %v", k.name, err))
		}
		k.ln = ln
		go k.accept(ln)
	}
	if k.ln == nil {
		return k.lab.urlFor("127.0.0.1:1")
	}
	return k.lab.urlFor(k.ln.Addr().String())
}

func (l *Lab) urlFor(host string) string {
	u := url.URL{Scheme: "amqp", Host: host, Path: "/"}
	if users := l.opts.Users; len(users) > 0 {
		u.User = url.UserPassword(users[0].Name, users[0].Password)
	} else if users == nil {
		u.User = url.UserPassword("guest", "guest")
	}
	return u.String()
}

// accept hands the Link's TCP connections to the broker running when
// each arrives; with none running it resets them, as a closed port does.
func (k *Link) accept(ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go k.admit(nc)
	}
}

// admit hands an accepted connection to the running broker once the
// Link lets it through.
func (k *Link) admit(nc net.Conn) {
	if !k.waitOpen() {
		resetConn(nc)
		return
	}
	_, d := k.lab.current()
	if d == nil {
		resetConn(nc)
		return
	}
	fc := k.wrap(nc, false)
	if !d.hand(fc) {
		fc.cut()
	}
}

// resetConn closes nc with a TCP RST (linger 0) when it is a socket.
func resetConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = nc.Close()
}

// Latency delays every read and write of the Link's connections by d; 0
// removes the delay.
func (k *Link) Latency(d time.Duration) {
	k.mu.Lock()
	k.latency = d
	k.mu.Unlock()
}

// Bandwidth caps each connection of the Link at bytesPerSecond each way;
// 0 removes the cap.
func (k *Link) Bandwidth(bytesPerSecond int64) {
	k.mu.Lock()
	k.bandwidth = bytesPerSecond
	k.mu.Unlock()
}

// BlackHole makes the Link drop every byte both ways without closing
// anything. Connections open now stay stalled for good; connections
// opened later hang until Heal.
func (k *Link) BlackHole() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held == nil {
		k.held = make(chan struct{})
	}
	k.hole = true
	k.holeEpoch++
	for c := range k.conns {
		c.holed = true
	}
}

// Partition holds every byte both ways, on open connections and new ones,
// until Heal delivers them.
func (k *Link) Partition() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held == nil {
		k.held = make(chan struct{})
	}
}

// Heal ends a Partition or BlackHole: held bytes flow again, except on
// the connections a BlackHole stalled for good.
func (k *Link) Heal() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held != nil {
		close(k.held)
		k.held = nil
	}
	k.hole = false
	for c := range k.conns {
		go c.flush() // what the partition held back goes out now
	}
}

// flush writes what a partition held back, unless a write did already.
func (c *faultConn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.flushLocked()
}

// waitOpen waits while the Link is a black hole (a new connection's
// handshake does not get through one); it reports false when the Link
// stopped.
func (k *Link) waitOpen() bool {
	for {
		k.mu.Lock()
		held, hole, stopped := k.held, k.hole, k.stopped
		k.mu.Unlock()
		if stopped {
			return false
		}
		if !hole {
			return true
		}
		<-held
	}
}

// ResetAfter resets each connection of the Link once n more bytes (both
// ways together) have passed it; connections opened later get n too. 0
// turns it off.
func (k *Link) ResetAfter(n int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reset = n
	for c := range k.conns {
		c.setBudget(n)
	}
}

// wrap puts nc on the Link. clientSide says nc is the client's end (the
// Dial door), so its writes are the client's frames; otherwise it is the
// accepted socket the broker will serve.
func (k *Link) wrap(nc net.Conn, clientSide bool) *faultConn {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seq++
	c := &faultConn{Conn: nc, link: k, clientSide: clientSide, closed: make(chan struct{})}
	c.trace = k.lab.tracer.conn(fmt.Sprintf("%s#%d", k.name, k.seq))
	c.setBudget(k.reset)
	if k.stopped {
		c.cut()
		return c
	}
	k.conns[c] = struct{}{}
	return c
}

func (k *Link) remove(c *faultConn) {
	k.mu.Lock()
	delete(k.conns, c)
	k.mu.Unlock()
}

// Cut resets every connection open on the Link now, without
// connection.close, as when the client process is killed: the broker
// returns what they held to their queues (redelivered). New connections
// work as before.
func (k *Link) Cut() { k.cutAll() }

// cutAll resets every connection of the Link (Crash).
func (k *Link) cutAll() {
	k.mu.Lock()
	cs := make([]*faultConn, 0, len(k.conns))
	for c := range k.conns {
		cs = append(cs, c)
	}
	k.mu.Unlock()
	for _, c := range cs {
		c.cut()
	}
}

// stop closes the Link's port and connections for good.
func (k *Link) stop() {
	k.mu.Lock()
	k.stopped = true
	ln := k.ln
	if k.held != nil {
		close(k.held)
		k.held = nil
	}
	k.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	k.cutAll()
}

// state reads what a read or write must do now: wait on held (nil: go),
// stay stalled for good (holed), the latency and the bandwidth.
func (k *Link) state(c *faultConn) (held chan struct{}, holed bool, latency time.Duration, bw int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.held, c.holed, k.latency, k.bandwidth
}

// faultConn is one connection on a Link: the Link's faults are applied
// in its Read and Write, and its frames traced.
type faultConn struct {
	net.Conn
	link       *Link
	clientSide bool
	trace      *connTrace
	holed      bool // stalled by a black hole for good (link.mu)

	readDeadline, writeDeadline atomic.Int64 // unix ns; 0 none

	wmu     sync.Mutex // orders writes, the partition's held bytes first
	pending []byte     // written during a partition, delivered at Heal

	budgetMu sync.Mutex
	budget   int64 // bytes left before a reset; <0 unlimited

	closed    chan struct{}
	closeOnce sync.Once
}

func (c *faultConn) setBudget(n int64) {
	c.budgetMu.Lock()
	if n <= 0 {
		c.budget = -1
	} else {
		c.budget = n
	}
	c.budgetMu.Unlock()
}

// take spends up to n bytes of the reset budget: it returns how many may
// pass and whether the connection must be reset after them.
func (c *faultConn) take(n int) (int, bool) {
	c.budgetMu.Lock()
	defer c.budgetMu.Unlock()
	if c.budget < 0 {
		return n, false
	}
	if int64(n) < c.budget {
		c.budget -= int64(n)
		return n, false
	}
	m := int(c.budget)
	c.budget = 0
	return m, true
}

// errReset is what reads and writes on a connection reset by the Link
// return.
var errReset = errors.New("brokertest: connection reset by the lab")

// gate applies the Link's faults to n bytes about to pass: it waits out a
// partition, stalls for good in a black hole, sleeps the latency and the
// bandwidth's share, and reports how many bytes pass and whether to reset
// after them.
// A deadline set on the connection (a client's heartbeat check) ends the
// wait with os.ErrDeadlineExceeded, as it would end a read on a dead
// route.
func (c *faultConn) gate(n int, deadline *atomic.Int64) (int, bool, error) {
	for {
		held, holed, latency, bw := c.link.state(c)
		var never chan struct{}
		if holed {
			held = never // a black hole: nothing ever moves again
		}
		var expired <-chan time.Time
		if d := deadline.Load(); d != 0 {
			t := time.NewTimer(time.Until(time.Unix(0, d)))
			defer t.Stop()
			expired = t.C
		}
		if held != nil || holed {
			select {
			case <-held:
				continue
			case <-c.closed:
				return 0, false, net.ErrClosed
			case <-expired:
				return 0, false, os.ErrDeadlineExceeded
			}
		}
		wait := latency
		if bw > 0 {
			wait += time.Duration(int64(n) * int64(time.Second) / bw)
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.closed:
				t.Stop()
				return 0, false, net.ErrClosed
			case <-expired:
				t.Stop()
				return 0, false, os.ErrDeadlineExceeded
			}
		}
		m, reset := c.take(n)
		return m, reset, nil
	}
}

func (c *faultConn) SetDeadline(t time.Time) error {
	c.readDeadline.Store(unixNano(t))
	c.writeDeadline.Store(unixNano(t))
	return c.Conn.SetDeadline(t)
}

func (c *faultConn) SetReadDeadline(t time.Time) error {
	c.readDeadline.Store(unixNano(t))
	return c.Conn.SetReadDeadline(t)
}

func (c *faultConn) SetWriteDeadline(t time.Time) error {
	c.writeDeadline.Store(unixNano(t))
	return c.Conn.SetWriteDeadline(t)
}

// unixNano is t in nanoseconds, 0 for no deadline.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		m, reset, gerr := c.gate(n, &c.readDeadline)
		if gerr != nil {
			return 0, gerr
		}
		c.trace.bytes(p[:m], !c.clientSide)
		if reset {
			c.cut()
			if m == 0 {
				return 0, errReset
			}
		}
		return m, nil
	}
	return n, err
}

// sendBuffer is how many bytes a connection's writes may leave behind
// during a partition, as a socket's send buffer takes them: a small write
// (an ack, a heartbeat) returns at once, a large one waits for Heal.
const sendBuffer = 256 << 10

func (c *faultConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	held, holed, _, _ := c.link.state(c)
	if holed {
		return len(p), nil // swallowed: taken by the socket, never delivered
	}
	if held != nil && len(c.pending)+len(p) <= sendBuffer {
		c.pending = append(c.pending, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.writeLocked(p)
}

// flushLocked writes what a partition held back (c.wmu held).
func (c *faultConn) flushLocked() error {
	if len(c.pending) == 0 {
		return nil
	}
	p := c.pending
	c.pending = nil
	_, err := c.writeLocked(p)
	return err
}

// writeLocked passes p through the Link's faults (c.wmu held).
func (c *faultConn) writeLocked(p []byte) (int, error) {
	m, reset, err := c.gate(len(p), &c.writeDeadline)
	if err != nil {
		return 0, err
	}
	n, werr := c.Conn.Write(p[:m])
	c.trace.bytes(p[:n], c.clientSide)
	if reset {
		c.cut()
		return n, errReset
	}
	return n, werr
}

func (c *faultConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	c.link.remove(c)
	return c.Conn.Close()
}

// cut resets the connection: no connection.close, a TCP RST on a socket.
func (c *faultConn) cut() {
	c.closeOnce.Do(func() { close(c.closed) })
	c.link.remove(c)
	resetConn(c.Conn)
}

// Broker returns the Lab's running broker (for Links passed around
// without their Lab).
func (k *Link) Broker() *broker.Broker { return k.lab.Broker() }
