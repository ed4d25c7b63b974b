package brokertest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/faultstore"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// Lab is a test broker that can be made to fail: restarted, crashed,
// cut off from its clients, slowed down, its stores broken. Make one with
// NewLab. Its clients reach it through Links (Dial, URL), which keep
// their address across Restart and Crash, so a client's reconnect loop
// finds the new broker where the old one was, as in production.
//
// A Lab keeps its durable state in memory, in stores that outlive the
// broker process they belong to: Restart and Crash start a new
// broker.Broker on the same stores. Every store call goes through one
// fault injector (internal/faultstore), which is how Crash stops the
// writes of the dying broker at one instant and how the store faults
// (FailAppends, DiskFull, HangStore) are made.
//
// The Lab's methods may be called from the test's goroutine or from
// others (a publisher goroutine, say), except those taking a testing.TB.
type Lab struct {
	t    testing.TB
	opts broker.Options // the Options of every start, stores included

	inj    *faultstore.Injector
	shards *faultstore.Shards
	meta   *faultstore.Meta
	index  *faultstore.Index

	tracer *tracer

	mu      sync.Mutex
	b       *broker.Broker
	door    *door // the current broker's share of the Links' connections
	links   []*Link
	def     *Link
	stopped bool // after the test's cleanup: no more starts
	starts  int
}

// NewLab starts a Lab broker configured by opts and closes it when the
// test ends. opts.Meta, opts.Shards and opts.Unacked default to in-memory
// stores that survive Restart and Crash; opts.DataDir must be empty (the
// Lab's stores are its disk). Give opts.Clock a *clock.Fake to drive
// time with Advance.
//
// When the test fails, the Lab logs every connection's wire trace (the
// frames each way, decoded and timed) through t.Log.
func NewLab(t testing.TB, opts broker.Options) *Lab {
	t.Helper()
	if opts.DataDir != "" {
		t.Fatalf("brokertest: NewLab: Options.DataDir must be empty: the Lab keeps its durable state in stores that survive Restart and Crash")
	}
	if opts.Storage.Shards == nil {
		opts.Storage.Shards = memory.New()
	}
	if opts.Storage.Meta == nil {
		opts.Storage.Meta = metamemory.New()
	}
	if opts.Storage.Unacked == nil {
		opts.Storage.Unacked = unacked.NewMemoryIndex()
	}
	l := &Lab{t: t, inj: faultstore.New(), tracer: newTracer()}
	l.inj.SetTracing(false) // the Lab reads no store trace; a long test would grow it
	l.shards = faultstore.WrapShards(opts.Storage.Shards, l.inj)
	l.meta = faultstore.WrapMeta(opts.Storage.Meta, l.inj)
	l.index = faultstore.WrapIndex(opts.Storage.Unacked, l.inj)
	opts.Storage.Shards, opts.Storage.Meta, opts.Storage.Unacked = l.shards, l.meta, l.index
	l.opts = opts
	l.def = l.newLink("default")
	t.Cleanup(func() {
		if t.Failed() {
			l.tracer.dump(t)
		}
		l.close()
	})
	if err := l.start(); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	return l
}

// Broker returns the broker running now. After Restart or Crash it is a
// new one: ask again rather than keep it.
func (l *Lab) Broker() *broker.Broker {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b
}

// Net returns the Lab's default Link: the one Dial, URL and DialAMQP use.
func (l *Lab) Net() *Link { return l.def }

// URL is the default Link's AMQP URI (a TCP port on 127.0.0.1 that stays
// the same across Restart and Crash).
func (l *Lab) URL() string { return l.def.URL() }

// Dial is the default Link's socket-free door; it fits amqp091.Config.Dial
// and reaches whichever broker runs when it is called.
func (l *Lab) Dial(network, addr string) (net.Conn, error) { return l.def.Dial(network, addr) }

// DialAMQP connects amqp091-go through the default Link's socket-free
// door with the given connection name (the client-provided name that
// CloseConnections matches; "" for none). The connection is closed by
// t.Cleanup.
func (l *Lab) DialAMQP(t testing.TB, name string) *amqp091.Connection {
	t.Helper()
	return l.def.DialAMQP(t, name)
}

// Advance moves the broker's clock (Options.Clock, which must be a
// *clock.Fake) forward by d, firing every timer due: message TTLs, queue
// expiry and whatever else follows the broker's clock.
func (l *Lab) Advance(d time.Duration) {
	f, ok := l.opts.Clock.(*clock.Fake)
	if !ok {
		panic("brokertest: Lab.Advance needs Options.Clock to be a *clock.Fake")
	}
	f.Advance(d)
}

// Restart stops the broker gracefully and starts a new one on the same
// stores, as `rabbitmqctl stop` and a start would: every connection is
// closed with 320 CONNECTION_FORCED, unacked deliveries go back to their
// queues; then durable queues and exchanges, persistent messages in
// durable queues and the deliveries that were unacked (now
// redelivered=true) are there again, while transient queues and transient
// messages are gone. Clients reconnect to the same address.
func (l *Lab) Restart() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b != nil {
		l.door.close()
		if err := l.b.Close(); err != nil {
			return err
		}
		l.b = nil
	}
	return l.startLocked()
}

// Crash kills the broker as `kill -9` would and starts a new one on what
// its stores kept. The stores stop taking writes at once (a store call
// under way finishes, as a write the kernel had taken does); every
// client's connection is cut without connection.close (TCP clients see a
// reset); the dying broker's goroutines are then reaped without anything
// more reaching the stores. What survives is what the stores had
// acknowledged: every confirmed persistent message in a durable queue,
// the topology, and the deliveries then unacked, which come back with
// redelivered=true. Publishes not yet confirmed may or may not be there,
// as after a real crash; the publisher must send them again. Store faults
// (FailAppends, DiskFull, HangStore) end with the crashed process.
func (l *Lab) Crash() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b != nil {
		l.inj.Crash()
		l.door.close()
		for _, k := range l.links {
			k.cutAll()
		}
		if err := l.b.Close(); err != nil {
			return err
		}
		l.b = nil
		l.inj.Clear()
	}
	return l.startLocked()
}

// Reset returns the Lab to the state of a new one between subtests: the
// broker is stopped, every store emptied, every fault of the stores and
// Links cleared, and a fresh broker started on the same addresses.
// Clients still connected are cut off.
func (l *Lab) Reset() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b != nil {
		l.door.close()
		for _, k := range l.links {
			k.cutAll()
			k.Heal()
		}
		if err := l.b.Close(); err != nil {
			return err
		}
		l.b = nil
	}
	l.inj.Clear()
	l.shards = faultstore.WrapShards(memory.New(), l.inj)
	l.meta = faultstore.WrapMeta(metamemory.New(), l.inj)
	l.index = faultstore.WrapIndex(unacked.NewMemoryIndex(), l.inj)
	l.opts.Storage.Shards, l.opts.Storage.Meta, l.opts.Storage.Unacked = l.shards, l.meta, l.index
	return l.startLocked()
}

func (l *Lab) start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startLocked()
}

// startLocked starts a broker on the Lab's stores and serves the Links'
// connections to it.
func (l *Lab) startLocked() error {
	if l.stopped {
		return errors.New("brokertest: lab closed")
	}
	b, err := broker.New(l.opts)
	if err != nil {
		return err
	}
	d := newDoor()
	go func() { _ = b.Serve(d) }()
	l.b, l.door = b, d
	l.starts++
	return nil
}

// close stops the broker and every Link for good.
func (l *Lab) close() {
	l.mu.Lock()
	l.stopped = true
	b, d, links := l.b, l.door, l.links
	l.b = nil
	l.mu.Unlock()
	for _, k := range links {
		k.stop()
	}
	if b != nil {
		d.close()
		if err := b.Close(); err != nil {
			l.t.Errorf("brokertest: close: %v", err)
		}
	}
}

// current returns the running broker and its door, or nils while none
// runs.
func (l *Lab) current() (*broker.Broker, *door) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b, l.door
}

// WaitIdle waits for the current broker's WaitIdle within ctx.
func (l *Lab) WaitIdle(ctx context.Context) error {
	b, _ := l.current()
	if b == nil {
		return errors.New("brokertest: no broker running")
	}
	return b.WaitIdle(ctx)
}

// door is a net.Listener the Lab's Links hand TCP connections to: the
// broker Serves it like any listener, and a restart gets a new one.
type door struct {
	conns  chan net.Conn
	done   chan struct{}
	closer sync.Once
}

func newDoor() *door {
	return &door{conns: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives nc to the broker; it reports false when the door is closed.
func (d *door) hand(nc net.Conn) bool {
	select {
	case d.conns <- nc:
		return true
	case <-d.done:
		return false
	}
}

func (d *door) Accept() (net.Conn, error) {
	select {
	case nc := <-d.conns:
		return nc, nil
	case <-d.done:
		return nil, net.ErrClosed
	}
}

func (d *door) Close() error {
	d.close()
	return nil
}

func (d *door) close() { d.closer.Do(func() { close(d.done) }) }

func (d *door) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
