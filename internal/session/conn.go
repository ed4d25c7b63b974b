package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/transport"
	"github.com/warrenmq/broker/internal/vhost"
)

// protocolHeader is the only header accepted, and the one sent back to a
// client that asked for something else (§4.2.2).
var protocolHeader = [8]byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}

// connState is where the handshake is (the connection class
// grammar). Only the reader goroutine advances it; Shutdown and the timers
// read it.
type connState int32

const (
	stateHeader   connState = iota // waiting for the protocol header
	stateStarting                  // connection.start sent, waiting for start-ok
	stateTuning                    // connection.tune sent, waiting for tune-ok
	stateOpening                   // waiting for connection.open
	stateOpen                      // connection.open-ok sent
)

func (s connState) String() string {
	switch s {
	case stateHeader:
		return "awaiting protocol header"
	case stateStarting:
		return "starting"
	case stateTuning:
		return "tuning"
	case stateOpening:
		return "opening"
	case stateOpen:
		return "open"
	}
	return fmt.Sprintf("connState(%d)", int32(s))
}

// errClosedByPeer ends the read loop after the peer's connection.close was
// answered.
var errClosedByPeer = errors.New("session: closed by peer")

// Conn is the server side of one AMQP connection. Create it with NewConn and
// run it with Serve; Shutdown may be called from any goroutine.
type Conn struct {
	id  string
	cfg *Config
	set settings
	log *slog.Logger
	// tr is the stream (nil on a direct connection); inPlace is tr when
	// the reader may write its replies itself (flushNow).
	tr      transport.Conn
	inPlace transport.InPlaceWriter
	// tryWrite is tr when a heartbeat tick may write its frame without
	// waiting (heartbeatTick); nil otherwise.
	tryWrite transport.TryWriter
	// clocked dates publishes (Config.Clock); nil without a clock.
	clocked transport.Clocked
	// frames is tr when it tells whether a frame is buffered: then the
	// reader holds the publishes of a read and hands them to their
	// queues together (held.go); nil hands each over at once.
	frames transport.FrameBufferer
	// trk is the registry of open channels inspection reads (inspect.go).
	trk *tracker

	// Owned by the reader goroutine (Serve).
	held             heldPublishes
	arena            []byte // the read's arena's uncarved tail (arena.go)
	user             string
	vhost            string
	clientProperties amqp.Table
	channelMax       uint16
	channels         map[uint16]*Channel
	// vh is the vhost opened by connection.open (nil in connection-only
	// mode); cancelNotify is the client's consumer_cancel_notify capability.
	vh           *vhost.VHost
	cancelNotify bool
	// blockedNotify is the client's connection.blocked capability: it is
	// told when an alarm holds its publishes (holdWhileBlocked).
	blockedNotify bool
	released      bool // releaseAll has deleted the exclusive queues
	// access is the user's permissions on vh (nil: unrestricted), admit
	// the release func of Config.Open; pubCache and getCache speed up the
	// permission checks of publishes and gets.
	access   *Access
	admit    func()
	pubCache accessCache
	getCache accessCache
	// authz is what Config.Login decided the user's permissions by, for
	// Config.Open; decided and topicDecided cache an Access's allowed
	// Authorizer answers (authz.go).
	authz        *Authz
	decided      decisions
	topicDecided decisions

	state    atomic.Int32  // connState
	closing  atomic.Bool   // connection.close sent: ignore all but close/close-ok (connection.close rules)
	frameMax atomic.Uint32 // negotiated frame-max; senders split bodies by it
	framesIn atomic.Uint64 // frames read, watched by the heartbeat monitor
	wrote    atomic.Bool   // the writer wrote since the last heartbeat tick
	// closeCause is the first connection.close either side sent, for the
	// ConnectionClosed event (events.go).
	closeCause atomic.Pointer[amqp.Error]

	out outbox

	// alarms is cfg.Alarms (nil: never blocked); blocked counts what an
	// alarm holds now (the reader, direct publishes). stop is closed (signalStop) once the
	// connection starts closing or its socket is closed: it wakes a reader
	// or direct publisher held by an alarm, so closing never waits for the
	// alarm to clear.
	alarms   *Alarms
	blocked  atomic.Int32 // held readers or direct publishes
	stop     chan struct{}
	stopOnce sync.Once

	closeRWCOnce sync.Once

	// sink is non-nil for a direct connection (NewDirect): what the server
	// sends goes to it instead of the outbox, and direct holds the state
	// that replaces the reader goroutine (see direct.go).
	sink   Sink
	direct directState

	// credExpires is when the credential the connection logged in with
	// stops being valid (zero: never), credExpiry the timer closing the
	// connection then (expiry.go); the reader owns both.
	credExpires time.Time
	credExpiry  clock.Timer
}

// NewConn returns a connection that will speak AMQP over rwc (a net.Conn, a
// net.Pipe end, anything), through transport.New. id names it in logs and
// must be unique within the broker: the unacked index keys deliveries on
// it. cfg is shared, not copied or modified.
func NewConn(rwc io.ReadWriteCloser, id string, cfg *Config) *Conn {
	return NewConnOn(transport.New(rwc), id, cfg)
}

// NewConnOn is NewConn over a transport of the caller's: frames come from
// tr and batches of encoded frames go to it, so the protocol runs without
// a socket.
func NewConnOn(tr transport.Conn, id string, cfg *Config) *Conn {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Conn{
		id:       id,
		tr:       tr,
		trk:      cfg.Counters.track(),
		cfg:      cfg,
		set:      cfg.settings(),
		log:      logger.With("conn", id),
		channels: make(map[uint16]*Channel),
		alarms:   cfg.Alarms,
		stop:     make(chan struct{}),
	}
	// Before tune-ok the spec only obliges peers to accept frame-min-size
	// (connection.tune, frame-max); RabbitMQ reads no larger frame (4096
	// bytes, 8192 from 4.1, so start-ok can carry a JWT). Accepting up to
	// the server's own limit instead is allowed, lets start-ok carry any
	// token every profile's RabbitMQ takes, and is the limit sends are
	// split by until negotiation lowers it.
	c.inPlace, _ = tr.(transport.InPlaceWriter)
	c.tryWrite, _ = tr.(transport.TryWriter)
	c.frames, _ = tr.(transport.FrameBufferer)
	if ck, ok := tr.(transport.Clocked); ok && cfg.Clock != nil {
		clk := cfg.Clock
		ck.SetClock(func() int64 { return clk.Now().UnixNano() })
		c.clocked = ck
	}
	c.tr.SetMaxFrameSize(c.set.frameMax)
	c.frameMax.Store(c.set.frameMax)
	return c
}

// ID returns the id given to NewConn.
func (c *Conn) ID() string { return c.id }

// Serve runs the connection: it reads and handles frames on the calling
// goroutine until the connection ends (a writer goroutine runs beside it
// while there is something to write), and returns only after both have
// stopped and the stream is closed. It returns nil
// when the connection was closed with the close handshake (by either side),
// otherwise why it ended. Call it once.
func (c *Conn) Serve() error {
	c.out.Lock()
	if !c.out.stopped {
		c.out.handshakeTimer = time.AfterFunc(c.set.handshakeTimeout, c.handshakeTimedOut)
	}
	c.out.Unlock()

	err := c.readLoop()
	c.finish()
	c.emitClosed(err)
	c.logEnded(err)
	return err
}

// Shutdown closes the connection from the server side: connection.close
// with code and text once the client has sent its protocol header (the
// client answers close-ok, or the connection is dropped after the close
// timeout), or simply the socket before that. It returns at once; Serve
// returns when the connection is gone. Safe from any goroutine, any number
// of times.
//
// On a direct connection the Sink learns the close (Sink.Closed) and the
// connection is released as soon as no Handle call is running.
func (c *Conn) Shutdown(code uint16, text string) {
	if connState(c.state.Load()) < stateStarting {
		c.closeRWC()
		return
	}
	c.closeWith(amqp.NewError(code, 0, 0, "%s", text))
}

// finish stops the writer (after it flushed what is queued, within the close
// timeout), every timer and the socket, then releases the channels.
func (c *Conn) finish() {
	c.stopCredentialExpiry()
	c.stopWriter()
	c.out.Lock()
	c.stopTimersLocked()
	c.out.Unlock()
	c.closeRWC()

	c.releaseAll()
}

// releaseAll releases every channel (cancelling consumers, requeueing what
// they hold) and deletes the connection's exclusive queues. It runs before
// close-ok goes out when the client closes, as in RabbitMQ, so a client that
// reconnects at once finds its exclusive queues gone; and again, doing
// nothing, when the connection finishes.
func (c *Conn) releaseAll() {
	for id, ch := range c.channels {
		delete(c.channels, id)
		ch.release()
	}
	if c.vh != nil && !c.released {
		c.released = true
		c.vh.ConnectionClosed(context.Background(), c.id)
	}
	if c.admit != nil {
		// Give back the connection's slot before close-ok, so a client
		// whose Close returned may connect again at once under a limit.
		c.admit()
		c.admit = nil
	}
}

// lingerAfterCloseOk keeps the socket open after our close-ok until the
// client hangs up (or the close timeout passes), as RabbitMQ does: closing
// at once can make the client's reader see EOF before it has processed the
// close-ok, and report a clean close as a failure.
func (c *Conn) lingerAfterCloseOk() {
	c.out.Lock()
	if !c.out.stopped && c.out.closeTimer == nil {
		c.out.closeTimer = time.AfterFunc(c.set.closeTimeout, c.closeRWC)
	}
	c.out.Unlock()
	c.closing.Store(true)
	c.drain()
}

func (c *Conn) closeRWC() {
	c.closeRWCOnce.Do(func() {
		if c.tr != nil { // a direct connection has no stream
			c.tr.Close()
		}
	})
	c.signalStop()
}

// signalStop wakes whatever an alarm holds (holdWhileBlocked,
// waitUnblocked): the connection is closing or gone.
func (c *Conn) signalStop() {
	c.stopOnce.Do(func() { close(c.stop) })
}

// isPublish reports whether a method frame's payload is basic.publish.
func isPublish(payload []byte) bool {
	cls, mth, _, err := amqp.MethodIDs(payload)
	return err == nil && cls == amqp.ClassBasic && mth == amqp.MethodBasicPublish
}

// publishing reports whether an alarm holds a reader that read f: a
// basic.publish, or a content header or body frame. Holding content frames
// too, as RabbitMQ 4.x's reader does (it blocks after a header or body
// frame), stops a publisher in the middle of a long body, whose bytes
// count towards the memory alarm, instead of letting it finish.
func publishing(f amqp.Frame) bool {
	switch f.Type {
	case amqp.FrameHeader, amqp.FrameBody:
		return true
	case amqp.FrameMethod:
		return isPublish(f.Payload)
	}
	return false
}

// errHungUpWhileBlocked ends a connection whose peer closed its socket while
// an alarm held the reader.
var errHungUpWhileBlocked = errors.New("session: peer closed the connection while blocked by a resource alarm")

// Blocked reports whether an alarm holds the connection's publishes now:
// its reader stopped reading (or, on a direct connection, a publish waits).
// Safe from any goroutine.
func (c *Conn) Blocked() bool { return c.blocked.Load() > 0 }

// holdWhileBlocked is called by the reader with a publishing frame in hand
// while an alarm is raised. Like RabbitMQ's reader it tells a client
// that announced the capability (connection.blocked with the reason),
// pauses the heartbeat monitor (the client's heartbeats are not read
// meanwhile) and stops reading until every alarm cleared, then sends
// connection.unblocked. The writer keeps running: consumers on the same
// connection still get deliveries, and the client still gets our
// heartbeats. It returns early when the connection closes (signalStop):
// Shutdown and the close handshake never wait for an alarm.
//
// It also watches the socket without reading it (transport.HangupWatcher):
// a peer that hangs up or resets while held has its socket closed at once, and
// holdWhileBlocked reports false, so the connection and its descriptor are
// freed while the alarm lasts. RabbitMQ 4.x notices only when a heartbeat
// it sends fails; a fleet of publishers that gave up would otherwise keep
// their descriptors for the alarm's duration. Frames the peer sent behind
// the held one are dropped with it: it hung up without waiting for them to
// be confirmed.
func (c *Conn) holdWhileBlocked() bool {
	active, changed := c.alarms.watch()
	if active == 0 {
		return true // cleared since the reader looked
	}
	c.blocked.Add(1)
	defer c.blocked.Add(-1)
	if c.blockedNotify {
		c.sendMethod(0, &amqp.ConnectionBlocked{Reason: BlockedReason(active)})
	}
	c.pauseHeartbeatMonitor()
	defer c.resumeHeartbeatMonitor()
	var hungUp <-chan struct{}
	if w, ok := c.tr.(transport.HangupWatcher); ok {
		var stopWatch func()
		hungUp, stopWatch = w.WatchHangup()
		defer stopWatch()
	}
	for active != 0 {
		select {
		case <-changed:
		case <-c.stop:
			return true
		case <-hungUp:
			c.log.Info("session: publisher hung up while blocked", "user", c.user, "reason", BlockedReason(active))
			c.closeRWC()
			return false
		}
		active, changed = c.alarms.watch()
	}
	if c.blockedNotify {
		c.sendMethod(0, &amqp.ConnectionUnblocked{})
	}
	return true
}

// pauseHeartbeatMonitor stops the missed-heartbeat check while the reader
// does not read (the client's heartbeats wait in the socket), as RabbitMQ's
// rabbit_heartbeat:pause_monitor. Only the reader calls it, so framesIn
// stays at what is stored here until resumeHeartbeatMonitor.
func (c *Conn) pauseHeartbeatMonitor() {
	c.out.Lock()
	c.out.lastFramesIn = c.framesIn.Load()
	c.out.monitorPaused = true
	c.out.Unlock()
}

// resumeHeartbeatMonitor restarts the check with a clean count.
func (c *Conn) resumeHeartbeatMonitor() {
	c.out.Lock()
	c.out.lastFramesIn = c.framesIn.Load()
	c.out.missedTicks = 0
	c.out.monitorPaused = false
	c.out.Unlock()
}

func (c *Conn) handshakeTimedOut() {
	if connState(c.state.Load()) != stateOpen {
		c.log.Warn("session: handshake timed out", "state", connState(c.state.Load()).String(), "timeout", c.set.handshakeTimeout)
		c.closeRWC()
	}
}

// readLoop reads frames until the connection ends.
func (c *Conn) readLoop() error {
	if done, err := c.handshake(); done {
		return err
	}
	defer c.handOver() // whatever ended the loop: what was read is routed
	for {
		if done, err := c.serveFrame(); done {
			return err
		}
	}
}

// handshake runs the connection up to connection.open on a goroutine of
// its own, while the reader's waits, and reports whether the read loop is
// over (and why). The handshake's deepest calls (the login, logging the
// open, the open event) grow a goroutine's stack to 8 KiB, and a parked
// goroutine's stack only shrinks a step per garbage collection: run on the
// reader, every connection opened since the last collection kept 8 KiB of
// stack while idle. On a goroutine that ends with the handshake, that
// stack goes back to the runtime's pool for the next handshake, and the
// reader keeps the few KiB its own frames need. The frames read ahead and
// the connection's state pass to the reader with the goroutine's result.
func (c *Conn) handshake() (done bool, err error) {
	type result struct {
		done bool
		err  error
	}
	res := make(chan result, 1)
	go func() {
		done, err := c.serveHandshake()
		res <- result{done, err}
	}()
	r := <-res
	return r.done, r.err
}

// serveHandshake reads the protocol header, sends connection.start and
// serves frames until the connection is open or the read loop is over.
func (c *Conn) serveHandshake() (done bool, err error) {
	hdr, err := c.tr.ReadProtocolHeader()
	if err != nil {
		return true, fmt.Errorf("session: reading protocol header: %w", err)
	}
	if hdr != protocolHeader {
		c.refuseProtocol()
		return true, fmt.Errorf("session: unsupported protocol header %q", hdr[:])
	}
	c.state.Store(int32(stateStarting))
	c.sendRaw(startFrame(&c.set, c.offeredMechanisms()))
	for connState(c.state.Load()) != stateOpen {
		if done, err := c.serveFrame(); done {
			return true, err
		}
	}
	return false, nil
}

// serveFrame reads and handles one frame; done reports that the read loop
// is over, with err why.
func (c *Conn) serveFrame() (done bool, err error) {
	// The publishes held go to their queues before a read that may wait.
	c.handOverIfIdle()
	// Read nothing more while the client has a full outbox to take:
	// what we read would only add replies to it.
	c.waitForRoom()
	f, err := c.tr.ReadFrame()
	if err != nil {
		c.handOver()
		return true, c.readFailed(err)
	}
	c.framesIn.Add(1)
	if c.held.n > 0 && (c.closing.Load() || !publishing(f)) {
		// Whatever comes next sees the publishes before it in their
		// queues.
		c.handOver()
	}
	if c.closing.Load() {
		return c.handleWhileClosing(f), nil
	}
	// While no alarm is raised this costs one atomic load per frame.
	if c.alarms != nil && c.alarms.active.Load() != 0 && publishing(f) {
		c.handOver()
		if !c.holdWhileBlocked() {
			return true, errHungUpWhileBlocked
		}
		if c.closing.Load() {
			// Closed while held: the publish is dropped like every frame
			// after connection.close.
			return c.handleWhileClosing(f), nil
		}
	}
	if err := c.handleFrame(f); err != nil {
		if errors.Is(err, errClosedByPeer) {
			c.lingerAfterCloseOk()
			return true, nil
		}
		c.closeWith(asError(err))
	}
	return false, nil
}

// readFailed decides how the read loop ends after a read error.
func (c *Conn) readFailed(err error) error {
	if c.closing.Load() {
		// We already said connection.close; a peer that hangs up instead of
		// answering close-ok, or garbage after it, changes nothing.
		c.drain()
		return nil
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		// A malformed frame (501): the stream is out of sync, so no later
		// frame can be trusted. Report it and keep reading only to let the
		// peer receive the close before the socket goes (closing a socket
		// with unread input resets it, and the reset can overtake our
		// connection.close).
		c.closeWith(ae)
		c.shutdownAfterFlush()
		c.drain()
		return ae
	}
	return fmt.Errorf("session: read: %w", err)
}

// drain discards input until the peer hangs up or the close timer closes the
// socket.
func (c *Conn) drain() {
	c.tr.Discard()
}

// shutdownAfterFlush makes the writer shut the write side (see
// shutdownWrite) once everything queued is written, so a peer waiting for us
// to hang up sees EOF right after our last frame.
func (c *Conn) shutdownAfterFlush() {
	c.out.Lock()
	c.out.halfClose = true
	c.out.Unlock()
	c.poke()
}

// refuseProtocol answers a wrong protocol header with ours and closes
// (§4.2.2).
func (c *Conn) refuseProtocol() {
	c.out.Lock()
	if !c.out.stopped {
		c.out.buf = append(c.out.buf, protocolHeader[:]...)
		c.out.halfClose = true
		c.closing.Store(true)
		c.out.closeTimer = time.AfterFunc(c.set.closeTimeout, c.closeRWC)
	}
	c.out.Unlock()
	c.poke()
	c.drain()
}

// closeWith sends connection.close for e and enters the closing state, where
// everything but connection.close and close-ok is ignored (the spec's connection.close rules);
// the socket is closed when close-ok arrives or after the close timeout. It
// does nothing when the connection is already closing or gone. Safe from any
// goroutine.
func (c *Conn) closeWith(e *amqp.Error) {
	if c.sink != nil {
		c.closeDirect(e)
		return
	}
	c.out.Lock()
	if c.out.stopped || c.closing.Load() {
		c.out.Unlock()
		return
	}
	c.closing.Store(true)
	c.recordClose(e)
	c.signalStop()
	c.out.buf = amqp.AppendMethodFrame(c.out.buf, 0, &amqp.ConnectionClose{
		ReplyCode: e.Code,
		ReplyText: e.Text,
		ClassId:   e.ClassID,
		MethodId:  e.MethodID,
	})
	c.out.closeTimer = time.AfterFunc(c.set.closeTimeout, c.closeTimedOut)
	c.out.Unlock()
	c.poke()
	level := slog.LevelWarn
	if e.Code == amqp.ConnectionForced {
		level = slog.LevelInfo
	}
	// No user attribute: closeWith runs on other goroutines (Shutdown) while
	// the reader may be setting c.user.
	c.log.Log(context.Background(), level, "session: closing connection", "code", e.Code, "text", e.Text)
}

func (c *Conn) closeTimedOut() {
	c.log.Debug("session: no connection.close-ok in time, dropping", "timeout", c.set.closeTimeout)
	c.closeRWC()
}

// handleWhileClosing handles a frame after connection.close was sent and
// reports whether the close handshake is complete.
func (c *Conn) handleWhileClosing(f amqp.Frame) bool {
	if f.Type != amqp.FrameMethod || f.Channel != 0 {
		return false
	}
	cls, mth, _, err := amqp.MethodIDs(f.Payload)
	if err != nil || cls != amqp.ClassConnection {
		return false
	}
	switch mth {
	case amqp.MethodConnectionCloseOk:
		return true
	case amqp.MethodConnectionClose:
		// Both sides closed at once: answer and be done.
		c.sendMethod(0, &amqp.ConnectionCloseOk{})
		return true
	}
	return false
}

// asError turns any handler error into the *amqp.Error to report; anything
// else is a bug on our side, reported as 541 INTERNAL_ERROR.
func asError(err error) *amqp.Error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae
	}
	return amqp.NewError(amqp.InternalError, 0, 0, "%v", err)
}

// handleFrame dispatches one frame of an open (not closing) connection. An
// error it returns closes the connection.
func (c *Conn) handleFrame(f amqp.Frame) error {
	switch f.Type {
	case amqp.FrameHeartbeat:
		// §4.2.7: heartbeat frames use channel zero and carry nothing; an
		// invalid one is a 501 frame error. (RabbitMQ answers 505 for a
		// heartbeat on another channel; the spec's code is used here.)
		if f.Channel != 0 {
			return amqp.NewError(amqp.FrameError, 0, 0, "heartbeat frame on channel %d", f.Channel)
		}
		if len(f.Payload) != 0 {
			return amqp.NewError(amqp.FrameError, 0, 0, "heartbeat frame with a %d-byte payload", len(f.Payload))
		}
		return nil
	case amqp.FrameMethod, amqp.FrameHeader, amqp.FrameBody:
	default:
		return amqp.NewError(amqp.FrameError, 0, 0, "unknown frame type %d", f.Type)
	}

	if f.Channel == 0 {
		if f.Type != amqp.FrameMethod {
			return amqp.NewError(amqp.UnexpectedFrame, 0, 0, "%s frame on channel 0", frameTypeName(f.Type))
		}
		return c.handleMethod0(f.Payload)
	}
	if s := connState(c.state.Load()); s != stateOpen {
		return amqp.NewError(amqp.UnexpectedFrame, 0, 0, "%s frame on channel %d while the connection is %s", frameTypeName(f.Type), f.Channel, s)
	}
	ch := c.channels[f.Channel]
	if ch == nil {
		return c.openChannel(f)
	}
	return c.channelResult(ch, ch.handleFrame(f))
}

// channelResult sorts what a channel's handler returned: a hard error is
// returned to close the connection, a soft one closes the channel.
func (c *Conn) channelResult(ch *Channel, err error) error {
	if err == nil {
		return nil
	}
	ae := asError(err)
	if ae.Hard() {
		return ae
	}
	ch.fail(ae)
	return nil
}

func frameTypeName(t uint8) string {
	switch t {
	case amqp.FrameMethod:
		return "method"
	case amqp.FrameHeader:
		return "content header"
	case amqp.FrameBody:
		return "content body"
	case amqp.FrameHeartbeat:
		return "heartbeat"
	}
	return fmt.Sprintf("type-%d", t)
}

// openChannel handles a frame on a channel number that is not open: only
// channel.open is valid there.
func (c *Conn) openChannel(f amqp.Frame) error {
	if f.Type != amqp.FrameMethod {
		return amqp.NewError(amqp.ChannelError, 0, 0, "%s frame on channel %d, which is not open", frameTypeName(f.Type), f.Channel)
	}
	m, err := amqp.DecodeMethod(f.Payload)
	if err != nil {
		return err
	}
	return c.openChannelMethod(f.Channel, m)
}

// openChannelMethod handles method m on channel id, which is not open.
func (c *Conn) openChannelMethod(id uint16, m amqp.Method) error {
	if _, ok := m.(*amqp.ChannelOpen); !ok {
		return amqp.NewError(amqp.ChannelError, m.ClassID(), m.MethodID(), "%s on channel %d, which is not open", m.Name(), id)
	}
	// channel-max is the highest usable channel number (connection.tune);
	// RabbitMQ refuses channels beyond it with 530 NOT_ALLOWED.
	if id > c.channelMax {
		return amqp.NewError(amqp.NotAllowed, m.ClassID(), m.MethodID(), "channel %d exceeds the negotiated channel_max (%d)", id, c.channelMax)
	}
	c.channels[id] = newChannel(c, id)
	c.sendMethod(id, &amqp.ChannelOpenOk{})
	return nil
}

// removeChannel forgets a closed channel so its number can be reused, and
// releases what it held.
func (c *Conn) removeChannel(ch *Channel) {
	delete(c.channels, ch.id)
	ch.release()
}

// handleMethod0 handles a method on channel 0: the connection class.
func (c *Conn) handleMethod0(payload []byte) error {
	m, err := amqp.DecodeMethod(payload)
	if err != nil {
		return err
	}
	return c.handleConnectionMethod(m)
}

// handleConnectionMethod handles a decoded method on channel 0.
func (c *Conn) handleConnectionMethod(m amqp.Method) error {
	if m.ClassID() != amqp.ClassConnection {
		// Channel 0 is the connection's own and can never be opened.
		return amqp.NewError(amqp.ChannelError, m.ClassID(), m.MethodID(), "%s on channel 0", m.Name())
	}
	if cl, ok := m.(*amqp.ConnectionClose); ok {
		// Valid in every state: a client may give up mid-handshake.
		// A direct connection (the Go API's channels, the management
		// API's get and publish) logs its open and close at DEBUG.
		level := slog.LevelInfo
		if c.sink != nil {
			level = slog.LevelDebug
		}
		c.log.Log(context.Background(), level, "session: client closed connection", "code", cl.ReplyCode, "text", cl.ReplyText, "user", c.user)
		c.recordClose(&amqp.Error{Code: cl.ReplyCode, Text: cl.ReplyText})
		c.releaseAll()
		c.sendMethod(0, &amqp.ConnectionCloseOk{})
		return errClosedByPeer
	}
	state := connState(c.state.Load())
	switch m := m.(type) {
	case *amqp.ConnectionStartOk:
		if state == stateStarting {
			return c.handleStartOk(m)
		}
	case *amqp.ConnectionTuneOk:
		if state == stateTuning {
			return c.handleTuneOk(m)
		}
	case *amqp.ConnectionOpen:
		if state == stateOpening {
			return c.handleOpen(m)
		}
	case *amqp.ConnectionUpdateSecret:
		if state == stateOpen {
			return c.handleUpdateSecret(m)
		}
	}
	// Out of sequence, a reply to something we never sent (secure-ok,
	// close-ok), or a server-only method (blocked, unblocked): "an invalid
	// sequence of frames" is 503 COMMAND_INVALID. (RabbitMQ answers 504 here;
	// the spec's code is used.)
	return amqp.NewError(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "%s is not valid while the connection is %s", m.Name(), state)
}

func (c *Conn) handleStartOk(m *amqp.ConnectionStartOk) error {
	c.clientProperties = m.ClientProperties
	user, err := c.login(m)
	if err != nil {
		return err
	}
	c.user = user
	c.armCredentialExpiry()
	c.state.Store(int32(stateTuning))
	c.sendMethod(0, &amqp.ConnectionTune{
		ChannelMax: c.set.channelMax,
		FrameMax:   c.set.frameMax,
		Heartbeat:  c.set.heartbeatSeconds,
	})
	return nil
}

// handleTuneOk checks the client's choice the way RabbitMQ's
// validate_negotiated_integer_value does: 530 NOT_ALLOWED for a frame-max
// below frame-min-size, and for a frame-max or channel-max above the
// server's or zero ("no limit") while the server has one. The heartbeat is
// the client's to choose (connection.tune-ok), zero disabling it.
func (c *Conn) handleTuneOk(m *amqp.ConnectionTuneOk) error {
	cls, mth := m.ClassID(), m.MethodID()
	switch {
	case m.FrameMax != 0 && m.FrameMax < c.set.frameMinSize:
		return amqp.NewError(amqp.NotAllowed, cls, mth, "negotiated frame_max = %d is lower than the minimum allowed value (%d)", m.FrameMax, c.set.frameMinSize)
	case m.FrameMax == 0 || m.FrameMax > c.set.frameMax:
		return amqp.NewError(amqp.NotAllowed, cls, mth, "negotiated frame_max = %d is higher than the maximum allowed value (%d)", m.FrameMax, c.set.frameMax)
	case m.ChannelMax == 0 || m.ChannelMax > c.set.channelMax:
		return amqp.NewError(amqp.NotAllowed, cls, mth, "negotiated channel_max = %d is higher than the maximum allowed value (%d)", m.ChannelMax, c.set.channelMax)
	}
	c.channelMax = m.ChannelMax
	c.frameMax.Store(m.FrameMax)
	c.tr.SetMaxFrameSize(m.FrameMax)
	if m.Heartbeat > 0 {
		c.startHeartbeat(time.Duration(m.Heartbeat) * time.Second)
	}
	c.state.Store(int32(stateOpening))
	return nil
}

func (c *Conn) handleOpen(m *amqp.ConnectionOpen) error {
	if c.cfg.VHost != nil {
		vh, ok := c.cfg.VHost(m.VirtualHost)
		if !ok {
			return amqp.NewError(amqp.NotAllowed, m.ClassID(), m.MethodID(), "vhost %s not found", m.VirtualHost)
		}
		c.vh = vh
	} else {
		exists := c.cfg.VHostExists
		if exists == nil {
			exists = func(v string) bool { return v == "/" }
		}
		if !exists(m.VirtualHost) {
			return amqp.NewError(amqp.NotAllowed, m.ClassID(), m.MethodID(), "vhost %s not found", m.VirtualHost)
		}
	}
	if c.cfg.Open != nil {
		access, release, err := c.cfg.Open(c.user, m.VirtualHost, c.authz)
		if err != nil {
			return err
		}
		c.access, c.admit = access, release
	}
	if caps, ok := c.clientProperties["capabilities"].(amqp.Table); ok {
		c.cancelNotify, _ = caps["consumer_cancel_notify"].(bool)
		c.blockedNotify, _ = caps["connection.blocked"].(bool)
	}
	c.vhost = m.VirtualHost
	c.state.Store(int32(stateOpen))
	if r, ok := c.tr.(transport.IdleReleaser); ok {
		r.ReleaseWhenIdle() // open: from now on it may idle for long
	}
	c.out.Lock()
	if c.out.handshakeTimer != nil {
		c.out.handshakeTimer.Stop()
		c.out.handshakeTimer = nil // an open connection keeps no timer
	}
	c.out.releaseIdleBuffersLocked() // connection.start's, ten times what most connections need
	c.out.Unlock()
	c.sendMethod(0, &amqp.ConnectionOpenOk{})
	c.log.Info("session: connection open", "user", c.user, "vhost", c.vhost, clientAttr(c.clientProperties))
	c.emitOpened()
	return nil
}
