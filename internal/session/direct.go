package session

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/vhost"
)

// A direct connection is a Conn without a socket, for the broker's
// in-process API. It is created open on its vhost (no handshake, no tune, no
// heartbeats) and runs the very same channel code as a TCP connection: the
// client hands it method structs with Handle, which takes the path a
// decoded frame takes, and everything the server would write as frames goes
// to a Sink as method structs, raw properties and bodies.
//
// The caller's goroutines play the reader goroutine, so Handle calls are
// serialized by a mutex. Hard errors close the connection (the Sink learns
// it through Closed), soft errors close the channel (the Sink receives
// channel.close), exactly as on the wire; the client of a direct connection
// need not answer close-ok, it simply stops using the channel or connection.

// ErrClosed is returned by Handle once the direct connection has ended.
var ErrClosed = errors.New("session: connection closed")

// Sink receives what a direct connection sends to its client, in the order
// the wire would carry it. Its methods run on whatever goroutine sends (the
// one calling Handle, a queue's goroutine delivering or confirming), under
// the connection's send lock: they must not block and must not call back
// into the Conn. m, props and body are only valid during the call (queues
// reuse their method structs and the bytes may be the stored message);
// a sink that keeps them must copy.
type Sink interface {
	// Method is a method without content on channel (0 for the connection).
	Method(channel uint16, m amqp.Method)
	// Content is basic.deliver, basic.get-ok or basic.return with the
	// message's raw property flags and list, and its body.
	Content(channel uint16, m amqp.Method, props, body []byte)
	// Closed is called once, when the connection has ended and released
	// everything it held: err is the error the server closed it with
	// (what connection.close would carry), nil when the client closed it.
	// Nothing is sent to the sink after Closed.
	Closed(err *amqp.Error)
}

// directState replaces the reader goroutine of a direct connection.
type directState struct {
	// mu serializes Handle calls and the release of the connection, the
	// way the single reader goroutine serializes frames.
	mu sync.Mutex
	// closeErr is why the server closed the connection; set under out's
	// lock together with closing and out.stopped.
	closeErr *amqp.Error
	// finished: the connection was released and Sink.Closed called.
	finished atomic.Bool
}

// NewDirect returns a direct connection, already open on vhost vh as user,
// that hands what it sends to sink. id names it in logs and must be unique
// within the broker: exclusive queues and the unacked index key on it.
// cfg is shared, not copied or modified. Do not call Serve on it: drive it
// with Handle, end it with Handle(0, &amqp.ConnectionClose{...}) (client
// side) or Shutdown (server side).
//
// A direct connection announces consumer_cancel_notify, so a deleted
// queue's consumers are told with basic.cancel.
func NewDirect(cfg *Config, id string, vh *vhost.VHost, user string, sink Sink) *Conn {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Conn{
		id:  id,
		cfg: cfg,
		// Tracked like a network connection so that the connection and
		// its channels are counted and listed (inspect.go) as RabbitMQ
		// lists its direct connections.
		trk:          cfg.Counters.track(),
		set:          cfg.settings(),
		log:          logger.With("conn", id),
		channels:     make(map[uint16]*Channel),
		user:         user,
		vh:           vh,
		vhost:        vh.Name(),
		cancelNotify: true,
		sink:         sink,
		alarms:       cfg.Alarms,
		stop:         make(chan struct{}),
	}
	c.channelMax = c.set.channelMax
	c.frameMax.Store(c.set.frameMax)
	c.state.Store(int32(stateOpen))
	c.log.Debug("session: direct connection open", "user", user, "vhost", c.vhost)
	c.emitOpened()
	return c
}

// SetAccess makes the direct connection check a's permissions, as a
// network connection of a's user does (nil, the default: unrestricted).
// Call it before the first Handle; it is not synchronized with Handle.
func (c *Conn) SetAccess(a *Access) { c.access = a }

// Handle runs method m from the client of a direct connection on channel
// (0: the connection class), with the raw properties and body when m
// carries content (basic.publish; both are owned by the connection from
// here on and must not be modified). It takes exactly the path a decoded
// frame takes and returns once the method was handled: replies have been
// handed to the Sink by then, except what queues send later (deliveries,
// confirms). It returns the *amqp.Error that m caused to close the channel
// or the connection (the Sink was told as well), ErrClosed when the
// connection had already ended, and nil otherwise. Safe from any goroutine;
// calls are serialized.
func (c *Conn) Handle(channel uint16, m amqp.Method, props, body []byte) error {
	return c.HandleContext(context.Background(), channel, m, props, body)
}

// HandleContext is Handle with a context for the one wait a direct
// connection has: while a resource alarm is raised (Config.Alarms) a
// basic.publish waits, before anything is handled, until every alarm
// cleared, as a TCP publisher's frame waits in a reader that stopped
// reading. If ctx ends first it returns ctx's error and the message is not
// published; the connection is unaffected. A close of the connection ends
// the wait (and the call returns ErrClosed).
func (c *Conn) HandleContext(ctx context.Context, channel uint16, m amqp.Method, props, body []byte) error {
	if c.sink == nil {
		return errors.New("session: Handle on a connection that is not direct")
	}
	if m == nil {
		return errors.New("session: Handle of a nil method")
	}
	if _, ok := m.(*amqp.BasicPublish); ok {
		if err := c.WaitUnblocked(ctx); err != nil {
			return err
		}
	}
	c.direct.mu.Lock()
	err := c.handleDirectLocked(channel, m, props, body)
	c.direct.mu.Unlock()
	c.finishIfClosing()
	return err
}

func (c *Conn) handleDirectLocked(channel uint16, m amqp.Method, props, body []byte) error {
	if c.closing.Load() {
		c.finishDirectLocked()
		return ErrClosed
	}
	soft, err := c.dispatchDirect(channel, m, props, body)
	if soft != nil {
		return soft
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, errClosedByPeer) {
		c.finishDirectLocked()
		return nil
	}
	ae := asError(err)
	c.closeWith(ae)
	c.finishDirectLocked()
	return ae
}

// dispatchDirect is handleFrame for a method that needs no decoding. A
// channel error has closed the channel when it returns it as soft; err
// closes the connection.
func (c *Conn) dispatchDirect(channel uint16, m amqp.Method, props, body []byte) (soft *amqp.Error, err error) {
	if channel == 0 {
		return nil, c.handleConnectionMethod(m)
	}
	ch := c.channels[channel]
	if ch == nil {
		return nil, c.openChannelMethod(channel, m)
	}
	err = ch.handleDirect(m, props, body)
	if err == nil {
		return nil, nil
	}
	if ae := asError(err); !ae.Hard() {
		soft = ae
	}
	return soft, c.channelResult(ch, err)
}

// handleDirect is handleFrame for a whole method: content arrives with its
// method, so the assembly states are passed through in one step.
func (ch *Channel) handleDirect(m amqp.Method, props, body []byte) error {
	if ch.closing {
		// Only the method's ids matter to the closing rules.
		ch.handleWhileClosing(amqp.Frame{Type: amqp.FrameMethod, Channel: ch.id, Payload: amqp.AppendMethod(nil, m)})
		return nil
	}
	if !m.HasContent() {
		return ch.handle(m)
	}
	ch.asm = assembly{state: expectHeader, method: m}
	if err := ch.checkBodySize(uint64(len(body))); err != nil {
		return err
	}
	ch.asm.props = props
	ch.asm.body = body
	ch.asm.size = uint64(len(body))
	return ch.complete()
}

// WaitUnblocked returns once no resource alarm is raised (at once, for one
// atomic load, when none is), when the connection closes, or when ctx ends
// (with ctx's error). HandleContext calls it for basic.publish outside the
// Handle mutex, so other calls and the connection's close go on; a caller
// with locks of its own may call it before taking them. Safe from any
// goroutine.
func (c *Conn) WaitUnblocked(ctx context.Context) error {
	if c.alarms == nil || c.alarms.active.Load() == 0 {
		return nil
	}
	active, changed := c.alarms.watch()
	if active == 0 {
		return nil
	}
	c.blocked.Add(1)
	defer c.blocked.Add(-1)
	for active != 0 {
		select {
		case <-changed:
		case <-c.stop:
			return nil // Handle finds the connection closing
		case <-ctx.Done():
			return ctx.Err()
		}
		active, changed = c.alarms.watch()
	}
	return nil
}

// closeDirect is closeWith for a direct connection: no connection.close to
// write and no close-ok to wait for. The connection is released by whoever
// holds (or next takes) the Handle mutex.
func (c *Conn) closeDirect(e *amqp.Error) {
	c.out.Lock()
	if c.out.stopped || c.closing.Load() {
		c.out.Unlock()
		return
	}
	c.closing.Store(true)
	c.out.stopped = true
	c.direct.closeErr = e
	c.recordClose(e)
	c.out.Unlock()
	c.signalStop()
	level := slog.LevelWarn
	if e.Code == amqp.ConnectionForced {
		level = slog.LevelInfo
	}
	c.log.Log(context.Background(), level, "session: closing direct connection", "code", e.Code, "text", e.Text)
	c.finishIfClosing()
}

// finishIfClosing releases a closing direct connection unless a Handle call
// holds the mutex; that call does it when it returns (Handle calls this
// after unlocking). So a close is never left half done: whoever sets closing
// tries afterwards, and whoever held the mutex then tries after releasing it.
func (c *Conn) finishIfClosing() {
	for c.closing.Load() && !c.direct.finished.Load() {
		if !c.direct.mu.TryLock() {
			return
		}
		c.finishDirectLocked()
		c.direct.mu.Unlock()
	}
}

// finishDirectLocked releases the channels and the connection's exclusive
// queues and tells the sink; it is finish without a writer or a socket.
func (c *Conn) finishDirectLocked() {
	if c.direct.finished.Load() {
		return
	}
	c.out.Lock()
	c.closing.Store(true)
	c.out.stopped = true // from here on sends are dropped
	e := c.direct.closeErr
	c.out.Unlock()
	c.signalStop()
	c.releaseAll()
	c.emitClosed(nil)
	c.direct.finished.Store(true)
	if n := c.cfg.Counters; n != nil {
		n.ConnectionsClosed.Add(1)
	}
	c.sink.Closed(e)
}
