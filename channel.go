package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
)

// directChannel is the channel number every direct Channel uses on its own
// direct connection.
const directChannel = 1

// Channel is an AMQP channel served in-process, without frames or a socket.
// Its methods have the names and signatures of *amqp091.Channel
// (github.com/rabbitmq/amqp091-go v1.16) and use its types, so an
// application interface over them is satisfied by both; each method runs
// the broker's session code exactly as a frame from a TCP client would.
// Errors are *amqp091.Error with the reply code the wire would carry.
//
// Each Channel is its own direct connection with one channel. So exclusive
// queues declared on a Channel belong to it and are deleted when it closes,
// for whatever reason (a channel error included), and basic.qos global
// applies to the Channel, as it does in RabbitMQ.
//
// Differences from amqp091-go, all where in-process calls can do better
// than the network:
//   - A method the broker answers with a channel or connection exception
//     returns that error even when amqp091-go could only report it later:
//     PublishWithContext, Ack, Nack, Reject and the noWait variants. The
//     error is also sent to NotifyClose listeners, and every later call
//     returns amqp091.ErrClosed, as in amqp091-go.
//   - Notifications (NotifyPublish, NotifyReturn, NotifyCancel) are
//     delivered by a goroutine of the Channel, in order, waiting for a slow
//     receiver as long as it takes without holding up the broker. When the
//     Channel closes, what is queued is handed only to receivers that are
//     ready, then the listener channels are closed.
//   - The error sent to NotifyClose listeners is delivered only to a
//     receiver that is ready (a buffered channel, as amqp091-go recommends);
//     then the listener channels are closed.
//
// All methods are safe for concurrent use. Synchronous methods run one at a
// time, like amqp091-go's RPCs.
type Channel struct {
	b    *Broker
	conn *session.Conn

	// callMu lets one synchronous method wait for its reply at a time.
	callMu sync.Mutex
	// sendMu is held shared by asynchronous methods while they run, so that
	// Close can wait for those under way before closing the channel:
	// afterwards they see closed and return amqp091.ErrClosed.
	sendMu  sync.RWMutex
	replies chan reply // 1-buffered; filled by the sink while mu.waiting

	// closed is mu.closed for lock-free checks on the publish and ack path.
	closed   atomic.Bool
	connDone atomic.Bool   // the direct connection ended (Sink.Closed ran)
	quit     chan struct{} // closed when the direct connection ended
	done     chan struct{} // closed when it ended and every goroutine exited
	wake     chan struct{} // 1-buffered: events are queued for the notifier

	mu struct {
		sync.Mutex
		// closed: no new calls or goroutines. Set when Close starts, when
		// the broker closed the channel or the connection.
		closed     bool
		closeErr   *amqp091.Error // why the broker closed it; nil for Close
		waiting    bool           // a synchronous call waits for its reply
		closesDone bool           // NotifyClose listeners were told and closed

		// refs counts what keeps the Channel registered with the broker:
		// the direct connection, each consumer's pump, the notifier and
		// each ConsumeWithContext watcher.
		refs int

		consumers map[string]*consumerBuf

		closes       []chan *amqp091.Error
		confirms     []chan amqp091.Confirmation
		returns      []chan amqp091.Return
		cancels      []chan string
		notifier     bool // the notifier goroutine was started
		notifierDone bool // it closed the listeners and is exiting

		events []event

		// Publisher confirms are handed out in order, one per publish,
		// like amqp091-go's resequencer does.
		confirmNext uint64          // the next sequence number to hand out
		confirmLate map[uint64]bool // acks (true) and nacks received out of order
	}
}

// reply is what a synchronous method waits for: the reply method's ids and
// the fields callers read, copied out of the (possibly reused) method
// struct, or the error that closed the channel or connection instead.
type reply struct {
	class, method    uint16
	name             string // queue.declare-ok queue, basic.consume-ok and cancel-ok tag
	count, consumers uint32
	get              *rawMessage // basic.get-ok
	err              *amqp091.Error
}

// rawMessage is a message the broker sent, copied out of the session's
// buffers with its properties still encoded: decoding is left to the
// goroutine that hands it to the application, off the queue's goroutine.
type rawMessage struct {
	raw         []byte // properties, then body: one allocation
	propsLen    int
	consumerTag string
	deliveryTag uint64
	redelivered bool
	exchange    string
	routingKey  string
	count       uint32 // basic.get-ok message-count
	replyCode   uint16 // basic.return
	replyText   string
}

func newRawMessage(props, body []byte) rawMessage {
	raw := make([]byte, len(props)+len(body))
	copy(raw, props)
	copy(raw[len(props):], body)
	return rawMessage{raw: raw, propsLen: len(props)}
}

// event is one notification for the notifier goroutine.
type event struct {
	kind    eventKind
	confirm amqp091.Confirmation
	ret     rawMessage
	tag     string
}

type eventKind uint8

const (
	eventConfirm eventKind = iota
	eventReturn
	eventCancel
)

// ChannelOption chooses who a Channel opened by Broker.Channel acts as and
// where: AsUser and OnVHost.
type ChannelOption func(*channelOptions)

// channelOptions is what the ChannelOptions chose; zero fields keep
// Channel's defaults.
type channelOptions struct {
	user    string
	asUser  bool
	vhost   string
	onVHost bool
}

// AsUser makes Broker.Channel open the Channel as the user named name, with
// that user's permissions on the vhost enforced on every method, as over
// AMQP: the user must exist and have permissions on the vhost (set with
// SetPermissions, or Options.Users' full grant), and a refused operation
// fails with 403 ACCESS_REFUSED. SetPermissions, ClearPermissions and
// DeleteUser apply to the open Channel at once, as to the user's AMQP
// connections. Without AsUser the Channel is unrestricted: it is the
// embedding program's own, acting as the first of Options.Users.
func AsUser(name string) ChannelOption {
	return func(o *channelOptions) { o.user, o.asUser = name, true }
}

// OnVHost makes Broker.Channel open the Channel on the virtual host named
// name ("" is "/") instead of the default one.
func OnVHost(name string) ChannelOption {
	return func(o *channelOptions) { o.vhost, o.onVHost = canonicalVHost(name), true }
}

// Channel opens an in-process channel. By default it opens on the broker's
// default virtual host ("/", or the first of Options.VHosts when "/" is not
// among them) as the first configured user, with no permission checks;
// OnVHost chooses another vhost and AsUser another user, whose permissions
// are then enforced. ctx bounds the wait for the channel to open.
//
// Opening fails, with the *amqp091.Error an AMQP client would get at
// connection.open, when the vhost does not exist (530 NOT_ALLOWED "vhost
// ... not found") and, with AsUser, when the user does not exist (403
// ACCESS_REFUSED) or has no permissions on the vhost (530 NOT_ALLOWED
// "access to vhost '...' refused for user '...'"): the codes an AMQP
// client gets for the same user and vhost, here as in RabbitMQ 4.x, whose
// direct connections (rabbit_direct:connect) run the same user and vhost
// checks. It returns ErrClosed once Close has been called.
func (b *Broker) Channel(ctx context.Context, opts ...ChannelOption) (*Channel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var o channelOptions
	for _, opt := range opts {
		opt(&o)
	}
	var vh *vhost.VHost
	if o.onVHost {
		var ok bool
		if vh, ok = b.lookupVHost(o.vhost); !ok {
			return nil, toError(amqp.NewError(amqp.NotAllowed, amqp.ClassConnection, amqp.MethodConnectionOpen, "vhost %s not found", o.vhost))
		}
	} else {
		var err error
		if vh, err = b.directVHost(); err != nil {
			return nil, err
		}
	}
	if !o.asUser {
		user := ""
		if len(b.opts.Users) > 0 {
			user = b.opts.Users[0].Name
		}
		return b.openChannel(ctx, vh, user, nil)
	}
	access, err := b.directAccess(ctx, o.user, vh.Name())
	if err != nil {
		return nil, err
	}
	return b.openChannel(ctx, vh, o.user, access)
}

// directAccess is the Access of a Channel opened AsUser(user) on the vhost
// named vh, or the *amqp091.Error an AMQP client would get at
// connection.open: the user must exist (RabbitMQ's direct connections
// authenticate the user without a password) and have permissions on vh.
// The Access is shared with the user's connections there (accounts.go),
// so permission changes reach the Channel.
func (b *Broker) directAccess(ctx context.Context, user, vh string) (*session.Access, error) {
	refused := func(code uint16, format string, args ...any) error {
		return toError(amqp.NewError(code, amqp.ClassConnection, amqp.MethodConnectionOpen, format, args...))
	}
	failed := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err() // the caller gave up; the store may be fine
		}
		return toError(errLoginUnavailable(err, amqp.ClassConnection, amqp.MethodConnectionOpen))
	}
	_, err := b.acct.logins.Lookup(ctx, user)
	switch {
	case login.Unavailable(err):
		return nil, failed(err)
	case err != nil:
		return nil, refused(amqp.AccessRefused, "user '%s' - no such user", user)
	}
	lctx, cancel := context.WithTimeout(ctx, b.opts.LoginTimeout)
	p, err := b.stores.meta.GetPermission(lctx, user, vh)
	cancel()
	switch {
	case login.Unavailable(err):
		return nil, failed(err)
	case err != nil:
		return nil, refused(amqp.NotAllowed, "access to vhost '%s' refused for user '%s'", vh, user)
	}
	g, err := compileGrant(p)
	if err != nil {
		return nil, refused(amqp.InternalError, "%v", err)
	}
	return b.sharedAccess(user, vh, g), nil
}

// openChannel opens a direct Channel on vh as user, checking access (nil:
// unrestricted): the work of Channel, which the management API's internal
// channel uses too, AsUser the requesting user (RabbitMQ's
// rabbit_mgmt_util:with_channel opens a direct connection as that user,
// with that user's permissions).
func (b *Broker) openChannel(ctx context.Context, vh *vhost.VHost, user string, access *session.Access) (*Channel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := &Channel{
		b:       b,
		replies: make(chan reply, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		wake:    make(chan struct{}, 1),
	}
	ch.mu.refs = 1 // the direct connection's
	ch.mu.consumers = make(map[string]*consumerBuf)
	ch.mu.confirmNext = 1
	id := fmt.Sprintf("direct#%d", b.nextID.Add(1))
	ch.conn = session.NewDirect(b.cfg, id, vh, user, (*channelSink)(ch))
	ch.conn.SetAccess(access)

	// Registered like a served connection: Close shuts it down with 320 and
	// waits for it (the wg count is dropped by ch.release).
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	b.mu.conns[ch.conn] = struct{}{}
	b.wg.Add(1)
	b.mu.Unlock()

	if _, err := ch.call(ctx, &amqp.ChannelOpen{}, true, amqp.MethodChannelOpenOk); err != nil {
		ch.closeConn()
		<-ch.done
		return nil, err
	}
	return ch, nil
}

// directVHost is the vhost Channel opens.
func (b *Broker) directVHost() (*vhost.VHost, error) {
	if vh, ok := b.lookupVHost("/"); ok {
		return vh, nil
	}
	if len(b.opts.VHosts) == 0 {
		return nil, errors.New("broker: no virtual host configured (Options.VHosts is empty)")
	}
	if vh, ok := b.lookupVHost(b.opts.VHosts[0]); ok {
		return vh, nil
	}
	return nil, fmt.Errorf("broker: virtual host %q was deleted", b.opts.VHosts[0])
}

// call runs a synchronous method: it hands m to the session and, when wait
// is set, returns the reply, which must be one of the methods want (of m's
// class). Without wait it returns only the error m caused.
func (ch *Channel) call(ctx context.Context, m amqp.Method, wait bool, want ...uint16) (reply, error) {
	ch.callMu.Lock()
	defer ch.callMu.Unlock()
	ch.mu.Lock()
	if ch.mu.closed {
		ch.mu.Unlock()
		return reply{}, amqp091.ErrClosed
	}
	ch.mu.waiting = wait
	ch.mu.Unlock()
	return ch.callLocked(ctx, m, wait, want)
}

// callLocked is call once callMu is held and waiting set.
func (ch *Channel) callLocked(ctx context.Context, m amqp.Method, wait bool, want []uint16) (reply, error) {
	err := ch.conn.Handle(directChannel, m, nil, nil)
	if !wait {
		if err != nil {
			return reply{}, ch.failed(err)
		}
		return reply{}, nil
	}
	// Replies reach the sink before Handle returns (the session answers on
	// the calling goroutine); waiting below keeps that a detail.
	var r reply
	select {
	case r = <-ch.replies:
	default:
		if err != nil {
			ch.stopWaiting()
			return reply{}, ch.failed(err)
		}
		select {
		case r = <-ch.replies:
		case <-ch.quit:
			r.err = ch.closeError()
		case <-ctx.Done():
			ch.stopWaiting()
			return reply{}, ctx.Err()
		}
	}
	ch.stopWaiting()
	if r.err != nil {
		ch.closeConn()
		return reply{}, r.err
	}
	if r.class != m.ClassID() || !wanted(r.method, want) {
		return reply{}, amqp091.ErrCommandInvalid
	}
	return r, nil
}

// stopWaiting ends a call's wait and drops a reply that came too late.
func (ch *Channel) stopWaiting() {
	ch.mu.Lock()
	ch.mu.waiting = false
	ch.mu.Unlock()
	select {
	case <-ch.replies:
	default:
	}
}

func wanted(id uint16, want []uint16) bool {
	for _, w := range want {
		if w == id {
			return true
		}
	}
	return false
}

// send runs an asynchronous method (no reply): publish, ack, nack, reject.
func (ch *Channel) send(m amqp.Method, props, body []byte) error {
	ch.sendMu.RLock()
	if ch.closed.Load() {
		ch.sendMu.RUnlock()
		return amqp091.ErrClosed
	}
	err := ch.conn.Handle(directChannel, m, props, body)
	ch.sendMu.RUnlock()
	if err != nil {
		return ch.failed(err)
	}
	return nil
}

// failed turns what Handle returned into the caller's error and ends the
// direct connection, which is of no use once its only channel is closed.
func (ch *Channel) failed(err error) error {
	ch.closeConn()
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return toError(ae)
	}
	if e := ch.closeError(); e != amqp091.ErrClosed {
		return e
	}
	return amqp091.ErrClosed
}

// closeError is what a call on the closed channel reports.
func (ch *Channel) closeError() *amqp091.Error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.mu.closeErr != nil {
		return ch.mu.closeErr
	}
	return amqp091.ErrClosed
}

// closeConn ends the direct connection from the client side, as
// connection.close would: unacked deliveries are requeued, consumers
// cancelled, exclusive queues deleted.
func (ch *Channel) closeConn() {
	if ch.connDone.Load() {
		return
	}
	_ = ch.conn.Handle(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess, ReplyText: "closed by the application"}, nil, nil)
}

// toError converts the session's error into amqp091-go's, as amqp091-go
// builds it from channel.close or connection.close.
func toError(e *amqp.Error) *amqp091.Error {
	return &amqp091.Error{Code: int(e.Code), Reason: e.Text, Server: true, Recover: !e.Hard()}
}

// release drops n references; the last one unregisters the Channel from the
// broker.
func (ch *Channel) release(n int) {
	if n == 0 {
		return
	}
	ch.mu.Lock()
	ch.mu.refs -= n
	last := ch.mu.refs == 0
	ch.mu.Unlock()
	if !last {
		return
	}
	close(ch.done)
	b := ch.b
	b.mu.Lock()
	delete(b.mu.conns, ch.conn)
	b.mu.Unlock()
	b.wg.Done()
}

// acquireLocked takes a reference for a new goroutine; it fails once the
// channel is closed.
func (ch *Channel) acquireLocked() bool {
	if ch.mu.closed {
		return false
	}
	ch.mu.refs++
	return true
}

// channelSink is the Channel seen by its direct connection.
type channelSink Channel

var _ session.Sink = (*channelSink)(nil)

func (s *channelSink) Method(channel uint16, m amqp.Method) {
	ch := (*Channel)(s)
	if channel != directChannel {
		return // connection.close-ok after closeConn
	}
	switch m := m.(type) {
	case *amqp.BasicAck:
		ch.confirmed(m.DeliveryTag, m.Multiple, true)
	case *amqp.BasicNack:
		ch.confirmed(m.DeliveryTag, m.Multiple, false)
	case *amqp.BasicCancel:
		ch.serverCancel(m.ConsumerTag)
	case *amqp.ChannelClose:
		ch.closedByBroker(&amqp091.Error{Code: int(m.ReplyCode), Reason: m.ReplyText, Server: true,
			Recover: !amqp.NewError(m.ReplyCode, 0, 0, "").Hard()})
	default:
		r := reply{class: m.ClassID(), method: m.MethodID()}
		switch m := m.(type) {
		case *amqp.QueueDeclareOk:
			r.name, r.count, r.consumers = m.Queue, m.MessageCount, m.ConsumerCount
		case *amqp.QueuePurgeOk:
			r.count = m.MessageCount
		case *amqp.QueueDeleteOk:
			r.count = m.MessageCount
		case *amqp.BasicConsumeOk:
			r.name = m.ConsumerTag
		case *amqp.BasicCancelOk:
			r.name = m.ConsumerTag
		}
		ch.reply(r)
	}
}

func (s *channelSink) Content(channel uint16, m amqp.Method, props, body []byte) {
	ch := (*Channel)(s)
	switch m := m.(type) {
	case *amqp.BasicDeliver:
		ch.mu.Lock()
		c := ch.mu.consumers[m.ConsumerTag]
		ch.mu.Unlock()
		if c == nil {
			return // cancelled with noWait while this was on its way
		}
		r := newRawMessage(props, body)
		r.consumerTag = m.ConsumerTag
		r.deliveryTag = m.DeliveryTag
		r.redelivered = m.Redelivered
		r.exchange = m.Exchange
		r.routingKey = m.RoutingKey
		c.push(r)
	case *amqp.BasicGetOk:
		r := newRawMessage(props, body)
		r.deliveryTag = m.DeliveryTag
		r.redelivered = m.Redelivered
		r.exchange = m.Exchange
		r.routingKey = m.RoutingKey
		r.count = m.MessageCount
		ch.reply(reply{class: m.ClassID(), method: m.MethodID(), get: &r})
	case *amqp.BasicReturn:
		ch.mu.Lock()
		if len(ch.mu.returns) > 0 {
			r := newRawMessage(props, body)
			r.replyCode = m.ReplyCode
			r.replyText = m.ReplyText
			r.exchange = m.Exchange
			r.routingKey = m.RoutingKey
			ch.pushEventLocked(event{kind: eventReturn, ret: r})
		}
		ch.mu.Unlock()
	}
}

// Closed runs once the direct connection has ended: the Channel is closed
// for good, waiting calls and NotifyClose listeners learn why, and every
// goroutine of the Channel is told to stop.
func (s *channelSink) Closed(err *amqp.Error) {
	ch := (*Channel)(s)
	// Gone from the listings (Stats, Connections, the management API)
	// before NotifyClose fires, so whoever saw the close sees it gone; the
	// broker still waits for the Channel's goroutines through release.
	ch.b.mu.Lock()
	delete(ch.b.mu.conns, ch.conn)
	ch.b.mu.Unlock()
	ch.mu.Lock()
	if !ch.mu.closed {
		ch.mu.closed = true
		if err != nil {
			ch.mu.closeErr = toError(err)
		}
	}
	ch.closed.Store(true)
	e := ch.mu.closeErr
	if ch.mu.waiting {
		r := reply{err: e}
		if e == nil {
			r.err = amqp091.ErrClosed
		}
		select {
		case ch.replies <- r:
		default:
		}
	}
	closes := ch.mu.closes
	ch.mu.closes = nil
	ch.mu.closesDone = true
	stopped := 0
	for _, c := range ch.mu.consumers {
		if c.stopWatch() {
			stopped++
		}
	}
	ch.mu.Unlock()
	ch.connDone.Store(true)
	close(ch.quit)
	for _, c := range closes {
		if e != nil {
			select {
			case c <- e:
			default:
			}
		}
		close(c)
	}
	ch.release(stopped + 1) // the watchers stopped, and the connection's reference
}

// reply hands a reply to the waiting call, if any.
func (ch *Channel) reply(r reply) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.mu.waiting {
		return
	}
	select {
	case ch.replies <- r:
	default:
	}
}

// closedByBroker records channel.close from the broker (a soft error).
func (ch *Channel) closedByBroker(e *amqp091.Error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.mu.closed {
		ch.mu.closed = true
		ch.mu.closeErr = e
	}
	ch.closed.Store(true)
	if ch.mu.waiting {
		select {
		case ch.replies <- reply{err: e}:
		default:
		}
	}
}

// IsClosed reports whether the channel is closed (by Close or by the
// broker).
func (ch *Channel) IsClosed() bool { return ch.closed.Load() }

// Close closes the channel: its consumers are cancelled, its unacked
// deliveries requeued, its exclusive queues deleted, and deliveries not yet
// received from consumer channels dropped (the broker requeued them). It
// returns once every goroutine of the Channel has exited. It is safe to call
// many times; after the first it returns nil.
func (ch *Channel) Close() error {
	ch.callMu.Lock()
	ch.mu.Lock()
	first := !ch.mu.closed
	ch.mu.closed = true
	ch.mu.waiting = first
	ch.mu.Unlock()
	// Wait for publishes and acks under way; later ones see closed.
	ch.sendMu.Lock()
	ch.closed.Store(true)
	ch.sendMu.Unlock()
	var err error
	if first {
		_, err = ch.callLocked(context.Background(), &amqp.ChannelClose{ReplyCode: amqp.ReplySuccess}, true, []uint16{amqp.MethodChannelCloseOk})
	}
	ch.closeConn()
	ch.callMu.Unlock()
	<-ch.done
	return err
}

// NotifyClose registers a listener for the error that closes the channel:
// a channel exception, or a connection exception of the broker (320
// CONNECTION_FORCED when the broker closes). The error is sent only if the
// listener is ready to receive it (give it a buffered channel); then c is
// closed, also on a graceful Close. c is returned.
func (ch *Channel) NotifyClose(c chan *amqp091.Error) chan *amqp091.Error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.mu.closesDone {
		close(c)
		return c
	}
	ch.mu.closes = append(ch.mu.closes, c)
	return c
}

// NotifyPublish registers a listener for publisher confirms (after
// Confirm): one Confirmation per publish, in publish order, starting with
// DeliveryTag 1. c is closed when the channel closes and returned.
func (ch *Channel) NotifyPublish(c chan amqp091.Confirmation) chan amqp091.Confirmation {
	return addListener(ch, &ch.mu.confirms, c)
}

// NotifyReturn registers a listener for mandatory publishes the broker
// could not route (basic.return). c is closed when the channel closes and
// returned.
func (ch *Channel) NotifyReturn(c chan amqp091.Return) chan amqp091.Return {
	return addListener(ch, &ch.mu.returns, c)
}

// NotifyCancel registers a listener for consumers the broker cancelled
// (their queue was deleted); it receives the consumer tag. c is closed when
// the channel closes and returned.
func (ch *Channel) NotifyCancel(c chan string) chan string {
	return addListener(ch, &ch.mu.cancels, c)
}

// addListener registers c on *list, served by the notifier goroutine; once
// the channel is closed c is closed at once instead. It returns c.
func addListener[T any](ch *Channel, list *[]chan T, c chan T) chan T {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.startNotifierLocked() {
		close(c)
		return c
	}
	*list = append(*list, c)
	return c
}

// startNotifierLocked starts the notifier goroutine on the first listener;
// it reports false once the channel is closed.
func (ch *Channel) startNotifierLocked() bool {
	if ch.mu.notifier {
		return !ch.mu.notifierDone
	}
	if !ch.acquireLocked() {
		return false
	}
	ch.mu.notifier = true
	go ch.notify()
	return true
}

func (ch *Channel) pushEventLocked(e event) {
	ch.mu.events = append(ch.mu.events, e)
	select {
	case ch.wake <- struct{}{}:
	default:
	}
}

// notify is the notifier goroutine: it hands queued events to the
// listeners in order, waiting for each receiver, until the connection ends;
// then it offers what is left to ready receivers and closes the listeners.
func (ch *Channel) notify() {
	defer ch.release(1)
	var batch []event
	closing := false
	for {
		ch.mu.Lock()
		batch, ch.mu.events = ch.mu.events, batch[:0]
		confirms, returns, cancels := ch.mu.confirms, ch.mu.returns, ch.mu.cancels
		ch.mu.Unlock()
		if len(batch) == 0 {
			if closing {
				break
			}
			select {
			case <-ch.wake:
			case <-ch.quit:
				closing = true
			}
			continue
		}
		for i := range batch {
			e := &batch[i]
			switch e.kind {
			case eventConfirm:
				closing = offer(confirms, e.confirm, ch.quit, closing)
			case eventReturn:
				closing = offer(returns, ch.returned(&e.ret), ch.quit, closing)
			case eventCancel:
				closing = offer(cancels, e.tag, ch.quit, closing)
			}
			batch[i] = event{}
		}
	}
	ch.mu.Lock()
	confirms, returns, cancels := ch.mu.confirms, ch.mu.returns, ch.mu.cancels
	ch.mu.confirms, ch.mu.returns, ch.mu.cancels = nil, nil, nil
	ch.mu.notifierDone = true
	ch.mu.events = nil
	ch.mu.Unlock()
	closeAll(confirms)
	closeAll(returns)
	closeAll(cancels)
}

// offer sends v to every listener, waiting for each until quit is closed;
// once it is (or when closing already), only to ready receivers. It reports
// whether the channel is closing.
func offer[T any](listeners []chan T, v T, quit <-chan struct{}, closing bool) bool {
	for _, l := range listeners {
		if !closing {
			select {
			case l <- v:
				continue
			case <-quit:
				closing = true
			}
		}
		select {
		case l <- v:
		default:
		}
	}
	return closing
}

func closeAll[T any](cs []chan T) {
	for _, c := range cs {
		close(c)
	}
}

// confirmed turns the broker's basic.ack and basic.nack into one
// Confirmation per publish, in order (the broker coalesces with multiple).
func (ch *Channel) confirmed(tag uint64, multiple, ack bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case multiple:
		for ch.mu.confirmNext <= tag {
			ch.confirmLocked(ack)
		}
	case tag == ch.mu.confirmNext:
		ch.confirmLocked(ack)
	case tag > ch.mu.confirmNext:
		if ch.mu.confirmLate == nil {
			ch.mu.confirmLate = make(map[uint64]bool)
		}
		ch.mu.confirmLate[tag] = ack
	}
	for len(ch.mu.confirmLate) > 0 {
		ack, ok := ch.mu.confirmLate[ch.mu.confirmNext]
		if !ok {
			break
		}
		delete(ch.mu.confirmLate, ch.mu.confirmNext)
		ch.confirmLocked(ack)
	}
}

func (ch *Channel) confirmLocked(ack bool) {
	if len(ch.mu.confirms) > 0 {
		ch.pushEventLocked(event{kind: eventConfirm, confirm: amqp091.Confirmation{DeliveryTag: ch.mu.confirmNext, Ack: ack}})
	}
	ch.mu.confirmNext++
}

// serverCancel handles basic.cancel from the broker: the consumer's queue
// is gone.
func (ch *Channel) serverCancel(tag string) {
	ch.mu.Lock()
	stopped := 0
	if c := ch.mu.consumers[tag]; c != nil {
		if ch.endConsumerLocked(c) {
			stopped = 1
		}
	}
	if len(ch.mu.cancels) > 0 {
		ch.pushEventLocked(event{kind: eventCancel, tag: tag})
	}
	ch.mu.Unlock()
	ch.release(stopped)
}

// Confirm puts the channel in confirm mode: every later publish is
// confirmed through NotifyPublish once every queue it reached has stored it
// (synced to disk when persistent and durable).
func (ch *Channel) Confirm(noWait bool) error {
	_, err := ch.call(context.Background(), &amqp.ConfirmSelect{Nowait: noWait}, !noWait, amqp.MethodConfirmSelectOk)
	return err
}

// Qos limits unacknowledged deliveries: per consumer created afterwards
// (global false) or for the whole channel (global true), RabbitMQ's reading.
// prefetchSize must be 0 (the broker answers 540 otherwise, as RabbitMQ
// does).
func (ch *Channel) Qos(prefetchCount, prefetchSize int, global bool) error {
	if prefetchCount < 0 || prefetchSize < 0 {
		return fmt.Errorf("amqp: Qos values must be non-negative (got prefetchCount=%d, prefetchSize=%d)", prefetchCount, prefetchSize)
	}
	_, err := ch.call(context.Background(), &amqp.BasicQos{
		PrefetchCount: uint16(prefetchCount),
		PrefetchSize:  uint32(prefetchSize),
		Global:        global,
	}, true, amqp.MethodBasicQosOk)
	return err
}

// Recover requeues every unacknowledged delivery of the channel
// (requeue=false is not supported, as in RabbitMQ: 540 NOT_IMPLEMENTED).
func (ch *Channel) Recover(requeue bool) error {
	_, err := ch.call(context.Background(), &amqp.BasicRecover{Requeue: requeue}, true, amqp.MethodBasicRecoverOk)
	return err
}

// Tx puts the channel in transaction mode.
func (ch *Channel) Tx() error {
	_, err := ch.call(context.Background(), &amqp.TxSelect{}, true, amqp.MethodTxSelectOk)
	return err
}

// TxCommit applies the transaction's publishes and acknowledgements; it
// returns once the published messages are stored.
func (ch *Channel) TxCommit() error {
	_, err := ch.call(context.Background(), &amqp.TxCommit{}, true, amqp.MethodTxCommitOk)
	return err
}

// TxRollback discards the transaction's publishes and acknowledgements.
func (ch *Channel) TxRollback() error {
	_, err := ch.call(context.Background(), &amqp.TxRollback{}, true, amqp.MethodTxRollbackOk)
	return err
}

// ExchangeDeclare declares an exchange, or checks that an existing one has
// the same kind and flags (406 PRECONDITION_FAILED otherwise).
func (ch *Channel) ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	return ch.exchangeDeclare(name, kind, false, durable, autoDelete, internal, noWait, args)
}

// ExchangeDeclarePassive checks that an exchange exists (404 NOT_FOUND
// otherwise).
func (ch *Channel) ExchangeDeclarePassive(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	return ch.exchangeDeclare(name, kind, true, durable, autoDelete, internal, noWait, args)
}

func (ch *Channel) exchangeDeclare(name, kind string, passive, durable, autoDelete, internal, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.ExchangeDeclare{
		Exchange:   name,
		Type:       kind,
		Passive:    passive,
		Durable:    durable,
		AutoDelete: autoDelete,
		Internal:   internal,
		NoWait:     noWait,
		Arguments:  toTable(args),
	}, !noWait, amqp.MethodExchangeDeclareOk)
	return err
}

// ExchangeDelete deletes an exchange and its bindings.
func (ch *Channel) ExchangeDelete(name string, ifUnused, noWait bool) error {
	_, err := ch.call(context.Background(), &amqp.ExchangeDelete{Exchange: name, IfUnused: ifUnused, NoWait: noWait}, !noWait, amqp.MethodExchangeDeleteOk)
	return err
}

// ExchangeBind binds exchange destination to exchange source with key.
func (ch *Channel) ExchangeBind(destination, key, source string, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.ExchangeBind{
		Destination: destination, Source: source, RoutingKey: key, NoWait: noWait, Arguments: toTable(args),
	}, !noWait, amqp.MethodExchangeBindOk)
	return err
}

// ExchangeUnbind removes a binding made by ExchangeBind.
func (ch *Channel) ExchangeUnbind(destination, key, source string, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.ExchangeUnbind{
		Destination: destination, Source: source, RoutingKey: key, NoWait: noWait, Arguments: toTable(args),
	}, !noWait, amqp.MethodExchangeUnbindOk)
	return err
}

// QueueDeclare declares a queue ("" asks the broker for a name), or checks
// that an existing one is equivalent (406 PRECONDITION_FAILED otherwise).
func (ch *Channel) QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	return ch.queueDeclare(name, false, durable, autoDelete, exclusive, noWait, args)
}

// QueueDeclarePassive returns the state of an existing queue (404
// NOT_FOUND if there is none).
func (ch *Channel) QueueDeclarePassive(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	return ch.queueDeclare(name, true, durable, autoDelete, exclusive, noWait, args)
}

func (ch *Channel) queueDeclare(name string, passive, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error) {
	if err := args.Validate(); err != nil {
		return amqp091.Queue{}, err
	}
	r, err := ch.call(context.Background(), &amqp.QueueDeclare{
		Queue:      name,
		Passive:    passive,
		Durable:    durable,
		AutoDelete: autoDelete,
		Exclusive:  exclusive,
		NoWait:     noWait,
		Arguments:  toTable(args),
	}, !noWait, amqp.MethodQueueDeclareOk)
	if err != nil {
		return amqp091.Queue{}, err
	}
	if noWait {
		return amqp091.Queue{Name: name}, nil
	}
	return amqp091.Queue{Name: r.name, Messages: int(r.count), Consumers: int(r.consumers)}, nil
}

// QueueBind binds queue name to exchange with key.
func (ch *Channel) QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.QueueBind{
		Queue: name, Exchange: exchange, RoutingKey: key, NoWait: noWait, Arguments: toTable(args),
	}, !noWait, amqp.MethodQueueBindOk)
	return err
}

// QueueUnbind removes a binding made by QueueBind.
func (ch *Channel) QueueUnbind(name, key, exchange string, args amqp091.Table) error {
	if err := args.Validate(); err != nil {
		return err
	}
	_, err := ch.call(context.Background(), &amqp.QueueUnbind{
		Queue: name, Exchange: exchange, RoutingKey: key, Arguments: toTable(args),
	}, true, amqp.MethodQueueUnbindOk)
	return err
}

// QueuePurge removes the queue's ready messages (not the unacknowledged
// ones) and returns how many.
func (ch *Channel) QueuePurge(name string, noWait bool) (int, error) {
	r, err := ch.call(context.Background(), &amqp.QueuePurge{Queue: name, NoWait: noWait}, !noWait, amqp.MethodQueuePurgeOk)
	return int(r.count), err
}

// QueueDelete deletes a queue and returns how many messages it held.
func (ch *Channel) QueueDelete(name string, ifUnused, ifEmpty, noWait bool) (int, error) {
	r, err := ch.call(context.Background(), &amqp.QueueDelete{Queue: name, IfUnused: ifUnused, IfEmpty: ifEmpty, NoWait: noWait}, !noWait, amqp.MethodQueueDeleteOk)
	return int(r.count), err
}

// Publish is PublishWithContext without a context.
func (ch *Channel) Publish(exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	return ch.PublishWithContext(context.Background(), exchange, key, mandatory, immediate, msg)
}

// PublishWithContext publishes msg to exchange with routing key key. The
// properties and body are copied: msg may be reused when it returns. While
// a resource alarm is raised (Broker.RaiseAlarm, Options.MemoryHighWatermark)
// it waits for the alarm to clear, or returns ctx's error without
// publishing. In confirm mode the publish is confirmed through
// NotifyPublish; unroutable mandatory messages come back through
// NotifyReturn. An error the broker answers the publish with (404 for a
// missing exchange, 406 for an oversized body, ...) is returned, and closes
// the channel.
func (ch *Channel) PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// While a resource alarm is raised the publish waits here, before
	// sendMu, so Close is not held up by it (alarms.go).
	if err := ch.conn.WaitUnblocked(ctx); err != nil {
		return err
	}
	if err := msg.Headers.Validate(); err != nil {
		return err
	}
	p := amqp.Properties{
		ContentType:     msg.ContentType,
		ContentEncoding: msg.ContentEncoding,
		Headers:         toTable(msg.Headers),
		DeliveryMode:    msg.DeliveryMode,
		Priority:        msg.Priority,
		CorrelationID:   msg.CorrelationId,
		ReplyTo:         msg.ReplyTo,
		Expiration:      msg.Expiration,
		MessageID:       msg.MessageId,
		Timestamp:       msg.Timestamp,
		Type:            msg.Type,
		UserID:          msg.UserId,
		AppID:           msg.AppId,
	}
	// One allocation for both: the broker keeps them as the stored message.
	buf := make([]byte, 0, propertiesSize(&p)+len(msg.Body))
	buf = p.Append(buf)
	n := len(buf)
	buf = append(buf, msg.Body...)
	return ch.send(&amqp.BasicPublish{Exchange: exchange, RoutingKey: key, Mandatory: mandatory, Immediate: immediate}, buf[:n:n], buf[n:])
}

// propertiesSize estimates the encoded size of p, so that one allocation
// usually holds properties and body.
func propertiesSize(p *amqp.Properties) int {
	n := 2 + 1 + 1 + 8
	for _, s := range [...]string{p.ContentType, p.ContentEncoding, p.CorrelationID, p.ReplyTo, p.Expiration, p.MessageID, p.Type, p.UserID, p.AppID, p.ClusterID} {
		if s != "" {
			n += 1 + len(s)
		}
	}
	if len(p.Headers) > 0 {
		n += 64 * len(p.Headers)
	}
	return n
}

// Ack acknowledges delivery tag (with multiple: every delivery up to it).
// An unknown tag is 406 PRECONDITION_FAILED, returned and closing the
// channel.
func (ch *Channel) Ack(tag uint64, multiple bool) error {
	return ch.send(&amqp.BasicAck{DeliveryTag: tag, Multiple: multiple}, nil, nil)
}

// Nack rejects delivery tag (with multiple: every delivery up to it),
// requeueing it in place or dead-lettering/discarding it.
func (ch *Channel) Nack(tag uint64, multiple, requeue bool) error {
	return ch.send(&amqp.BasicNack{DeliveryTag: tag, Multiple: multiple, Requeue: requeue}, nil, nil)
}

// Reject rejects one delivery, requeueing it in place or
// dead-lettering/discarding it.
func (ch *Channel) Reject(tag uint64, requeue bool) error {
	return ch.send(&amqp.BasicReject{DeliveryTag: tag, Requeue: requeue}, nil, nil)
}

// Get takes one message from queue; ok is false when it is empty.
func (ch *Channel) Get(queue string, autoAck bool) (msg amqp091.Delivery, ok bool, err error) {
	r, err := ch.call(context.Background(), &amqp.BasicGet{Queue: queue, NoAck: autoAck}, true, amqp.MethodBasicGetOk, amqp.MethodBasicGetEmpty)
	if err != nil || r.get == nil {
		return amqp091.Delivery{}, false, err
	}
	return ch.delivery(r.get), true, nil
}

// Consume is ConsumeWithContext without a context.
func (ch *Channel) Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error) {
	return ch.ConsumeWithContext(context.Background(), queue, consumer, autoAck, exclusive, noLocal, noWait, args)
}

// consumerSeq numbers generated consumer tags.
var consumerSeq atomic.Uint64

// ConsumeWithContext starts a consumer on queue and returns its deliveries.
// consumer "" generates a tag. The delivery channel is buffered without
// bound (the queue never waits for the application; prefetch via Qos is
// what limits unacknowledged deliveries) and is closed when the consumer is
// cancelled (by Cancel, by ctx, or by the broker because the queue was
// deleted: after what was already delivered) or the channel closes (what
// was not yet received is dropped; the broker requeues it).
func (ch *Channel) ConsumeWithContext(ctx context.Context, queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error) {
	if err := args.Validate(); err != nil {
		return nil, err
	}
	if consumer == "" {
		consumer = fmt.Sprintf("ctag-warren-direct-%d", consumerSeq.Add(1))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Registered before basic.consume: the first delivery may reach the sink
	// before the call returns.
	c := &consumerBuf{tag: consumer, out: make(chan amqp091.Delivery), wake: make(chan struct{}, 1)}
	ch.mu.Lock()
	dup := ch.mu.consumers[consumer] != nil
	if !dup {
		if !ch.acquireLocked() {
			ch.mu.Unlock()
			return nil, amqp091.ErrClosed
		}
		ch.mu.consumers[consumer] = c
		go ch.pump(c)
	}
	ch.mu.Unlock()

	_, err := ch.call(ctx, &amqp.BasicConsume{
		Queue:       queue,
		ConsumerTag: consumer,
		NoLocal:     noLocal,
		NoAck:       autoAck,
		Exclusive:   exclusive,
		NoWait:      noWait,
		Arguments:   toTable(args),
	}, !noWait, amqp.MethodBasicConsumeOk)
	if dup && err == nil {
		// The broker refuses a reused tag, so this is not reached; do not
		// hand out a channel nobody feeds.
		return nil, amqp091.ErrClosed
	}
	if err != nil {
		if !dup {
			ch.endConsumer(c)
		}
		return nil, err
	}
	if ctx.Done() != nil {
		ch.mu.Lock()
		if ch.mu.consumers[consumer] == c && ch.acquireLocked() {
			c.stop = context.AfterFunc(ctx, func() {
				defer ch.release(1)
				_ = ch.Cancel(consumer, false)
			})
		}
		ch.mu.Unlock()
	}
	return c.out, nil
}

// Cancel stops consumer: its delivery channel is closed once the
// deliveries already made to it are received. Its unacknowledged
// deliveries stay unacknowledged (basic.cancel requeues nothing).
func (ch *Channel) Cancel(consumer string, noWait bool) error {
	if _, err := ch.call(context.Background(), &amqp.BasicCancel{ConsumerTag: consumer, NoWait: noWait}, !noWait, amqp.MethodBasicCancelOk); err != nil {
		return err
	}
	ch.mu.Lock()
	c := ch.mu.consumers[consumer]
	ch.mu.Unlock()
	if c != nil {
		ch.endConsumer(c)
	}
	return nil
}

// consumerBuf is one consumer's delivery buffer: the sink appends on the
// queue's goroutine without ever waiting, the consumer's pump goroutine
// hands deliveries to the application.
type consumerBuf struct {
	tag  string
	out  chan amqp091.Delivery
	wake chan struct{} // 1-buffered
	// stop cancels the ConsumeWithContext watcher; nil without one. Read
	// and cleared under Channel.mu.
	stop func() bool

	mu     sync.Mutex
	queue  []rawMessage
	ended  bool // cancelled: close out once queue is drained
	closed bool // the pump exited: drop pushes
}

func (c *consumerBuf) push(r rawMessage) {
	c.mu.Lock()
	if c.ended || c.closed {
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// stopWatch stops the context watcher and reports whether it will never
// run (so its reference is the caller's to release). Under Channel.mu.
func (c *consumerBuf) stopWatch() bool {
	if c.stop == nil {
		return false
	}
	stopped := c.stop()
	c.stop = nil
	return stopped
}

// endConsumer forgets c; its pump drains and closes the delivery channel.
func (ch *Channel) endConsumer(c *consumerBuf) {
	ch.mu.Lock()
	stopped := 0
	if ch.endConsumerLocked(c) {
		stopped = 1
	}
	ch.mu.Unlock()
	ch.release(stopped)
}

// endConsumerLocked reports whether a watcher reference is to be released.
func (ch *Channel) endConsumerLocked(c *consumerBuf) bool {
	if ch.mu.consumers[c.tag] == c {
		delete(ch.mu.consumers, c.tag)
	}
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return c.stopWatch()
}

// pump is a consumer's goroutine: it decodes deliveries and hands them to
// the application in order, until the consumer ends (then it drains) or
// the connection ends (then it drops: the broker requeued them).
func (ch *Channel) pump(c *consumerBuf) {
	defer ch.release(1)
	defer close(c.out)
	defer func() {
		c.mu.Lock()
		c.closed = true
		c.queue = nil
		c.mu.Unlock()
	}()
	var batch []rawMessage
	for {
		c.mu.Lock()
		batch, c.queue = c.queue, batch[:0]
		ended := c.ended
		c.mu.Unlock()
		if len(batch) == 0 {
			if ended {
				return
			}
			select {
			case <-c.wake:
				continue
			case <-ch.quit:
				return
			}
		}
		for i := range batch {
			d := ch.delivery(&batch[i])
			batch[i] = rawMessage{}
			select {
			case c.out <- d:
			case <-ch.quit:
				return
			}
		}
	}
}

// delivery decodes a message for the application. Properties were checked
// when the message was published; should a stored message's not decode, it
// is delivered with the properties that did.
func (ch *Channel) delivery(r *rawMessage) amqp091.Delivery {
	p, _ := amqp.DecodeProperties(r.raw[:r.propsLen])
	return amqp091.Delivery{
		Acknowledger:    ch,
		Headers:         fromTable(p.Headers),
		ContentType:     p.ContentType,
		ContentEncoding: p.ContentEncoding,
		DeliveryMode:    p.DeliveryMode,
		Priority:        p.Priority,
		CorrelationId:   p.CorrelationID,
		ReplyTo:         p.ReplyTo,
		Expiration:      p.Expiration,
		MessageId:       p.MessageID,
		Timestamp:       localTime(p.Timestamp),
		Type:            p.Type,
		UserId:          p.UserID,
		AppId:           p.AppID,
		ConsumerTag:     r.consumerTag,
		MessageCount:    r.count,
		DeliveryTag:     r.deliveryTag,
		Redelivered:     r.redelivered,
		Exchange:        r.exchange,
		RoutingKey:      r.routingKey,
		Body:            r.raw[r.propsLen:len(r.raw):len(r.raw)],
	}
}

func (ch *Channel) returned(r *rawMessage) amqp091.Return {
	p, _ := amqp.DecodeProperties(r.raw[:r.propsLen])
	return amqp091.Return{
		ReplyCode:       r.replyCode,
		ReplyText:       r.replyText,
		Exchange:        r.exchange,
		RoutingKey:      r.routingKey,
		ContentType:     p.ContentType,
		ContentEncoding: p.ContentEncoding,
		Headers:         fromTable(p.Headers),
		DeliveryMode:    p.DeliveryMode,
		Priority:        p.Priority,
		CorrelationId:   p.CorrelationID,
		ReplyTo:         p.ReplyTo,
		Expiration:      p.Expiration,
		MessageId:       p.MessageID,
		Timestamp:       localTime(p.Timestamp),
		Type:            p.Type,
		UserId:          p.UserID,
		AppId:           p.AppID,
		Body:            r.raw[r.propsLen:len(r.raw):len(r.raw)],
	}
}

// localTime gives timestamps the location amqp091-go decodes them in
// (time.Unix: local), so both doors deliver equal values.
func localTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Unix(t.Unix(), 0)
}

// toTable converts amqp091-go's field table to the broker's: the value
// types are the same except nested tables and decimals.
func toTable(t amqp091.Table) amqp.Table {
	if t == nil {
		return nil
	}
	out := make(amqp.Table, len(t))
	for k, v := range t {
		out[k] = toValue(v)
	}
	return out
}

func toValue(v any) any {
	switch v := v.(type) {
	case amqp091.Table:
		return toTable(v)
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = toValue(e)
		}
		return a
	case amqp091.Decimal:
		return amqp.Decimal{Scale: v.Scale, Value: v.Value}
	}
	return v
}

// fromTable converts the broker's field table to amqp091-go's, with the
// value types amqp091-go decodes from the wire.
func fromTable(t amqp.Table) amqp091.Table {
	if t == nil {
		return nil
	}
	out := make(amqp091.Table, len(t))
	for k, v := range t {
		out[k] = fromValue(v)
	}
	return out
}

func fromValue(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return fromTable(v)
	case map[string]any:
		return fromTable(v)
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = fromValue(e)
		}
		return a
	case amqp.Decimal:
		return amqp091.Decimal{Scale: v.Scale, Value: v.Value}
	case time.Time:
		return localTime(v)
	}
	return v
}
