package direct

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/memuse"
	"github.com/warrenmq/broker/internal/session"
)

// directChannel is the channel number every direct Channel uses on its own
// direct connection.
const directChannel = 1

// Channel is the direct Channel: one direct connection (session.NewDirect)
// with one channel, whose methods hand the session the method a client's
// frame would carry and wait for its reply. broker.Channel wraps it and
// documents its contract; this package is its implementation.
type Channel struct {
	conn *session.Conn
	// forget takes the direct connection out of the broker's listings
	// when it ends; release tells the broker the Channel's last goroutine
	// has exited (Config).
	forget, onRelease func()
	// heldReplies counts the bytes direct reply-to consumers hold.
	heldReplies *memuse.Counter

	// callMu lets one synchronous method wait for its reply at a time.
	callMu sync.Mutex
	// pubMu orders publishes in confirm mode: a publish takes the next
	// sequence number and is handed to the session under it, so the
	// number is the delivery tag the broker confirms it with.
	pubMu sync.Mutex
	// confirming is set once Confirm succeeded; published counts the
	// publishes since (written under pubMu), GetNextPublishSeqNo's count.
	confirming atomic.Bool
	published  atomic.Uint64
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
		confirmPairs []confirmPair
		returns      []chan amqp091.Return
		cancels      []chan string
		flows        []chan bool
		states       []chan *amqp091.StateChanged
		notifier     bool // the notifier goroutine was started
		notifierDone bool // it closed the listeners and is exiting

		// state is the life-cycle state NotifyStateChange reports: open,
		// closing once Close started, closed once the connection ended.
		state amqp091.LifeCycleState
		// recoveryCancels are NotifyRecoveryCancel's receivers, closed
		// when the channel starts closing.
		recoveryCancels []chan struct{}

		events []event

		// Publisher confirms are handed out in order, one per publish,
		// like amqp091-go's resequencer does.
		confirmNext uint64          // the next sequence number to hand out
		confirmLate map[uint64]bool // acks (true) and nacks received out of order
		// deferred holds the DeferredConfirmations of publishes not yet
		// confirmed, by sequence number.
		deferred map[uint64]*amqp091.DeferredConfirmation
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

	// replies is set for a direct reply-to consumer: no queue or credit
	// bounds what it is sent, so the replies it holds for the
	// application (held, their bytes) are bounded by MaxHeldReplies
	// and counted against the memory alarm in replies.
	replies *memuse.Counter
	held    int64
}

// event is one notification for the notifier goroutine.
type event struct {
	kind    eventKind
	confirm amqp091.Confirmation
	ret     rawMessage
	tag     string
	state   *amqp091.StateChanged
}

type eventKind uint8

const (
	eventConfirm eventKind = iota
	eventReturn
	eventCancel
	eventState
)

// confirmPair is one NotifyConfirm listener: acked sequence numbers go to
// ack, nacked ones to nack (which may be the same channel).
type confirmPair struct{ ack, nack chan uint64 }

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
	ch.forget()
	ch.onRelease()
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

// IsClosed is broker.Channel's IsClosed, documented there.
func (ch *Channel) IsClosed() bool { return ch.closed.Load() }

// Close is broker.Channel's Close, documented there.
func (ch *Channel) Close() error {
	ch.callMu.Lock()
	ch.mu.Lock()
	first := !ch.mu.closed
	ch.mu.closed = true
	ch.mu.waiting = first
	if first {
		ch.setStateLocked(amqp091.StateClosing, nil)
	}
	cancels := ch.mu.recoveryCancels
	ch.mu.recoveryCancels = nil
	ch.mu.Unlock()
	closeAll(cancels)
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
