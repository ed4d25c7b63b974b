package direct

import (
	"context"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/memuse"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
)

// Config is what Open needs from the broker that owns the Channel.
type Config struct {
	Session *session.Config
	// ID names the direct connection in the listings.
	ID     string
	VHost  *vhost.VHost
	User   string
	Access *session.Access // nil: unrestricted
	// HeldReplies counts the bytes direct reply-to consumers hold, for
	// the memory alarm.
	HeldReplies *memuse.Counter
	// Register adds the direct connection to the broker's connections,
	// which Close shuts down and waits for (Release is the end of that
	// wait); it returns an error, which Open returns, when the broker is
	// closed, and Release is then never called.
	Register func(*session.Conn) error
	// Forget takes the connection out of the broker's listings once it
	// ended, before NotifyClose listeners hear of it; it may be called
	// more than once.
	Forget func(*session.Conn)
	// Release is called once, when the connection has ended and every
	// goroutine of the Channel has exited.
	Release func()
}

// Open opens a Channel on a new direct connection on cfg.VHost as
// cfg.User: the work of broker.Broker.Channel once the vhost, the user's
// access and its place under the vhost's connection limit are settled.
// ctx bounds the wait for channel.open-ok.
func Open(ctx context.Context, cfg Config) (*Channel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := &Channel{
		heldReplies: cfg.HeldReplies,
		replies:     make(chan reply, 1),
		quit:        make(chan struct{}),
		done:        make(chan struct{}),
		wake:        make(chan struct{}, 1),
	}
	ch.mu.refs = 1 // the direct connection's
	ch.mu.consumers = make(map[string]*consumerBuf)
	ch.mu.confirmNext = 1
	ch.conn = session.NewDirect(cfg.Session, cfg.ID, cfg.VHost, cfg.User, (*channelSink)(ch))
	ch.conn.SetAccess(cfg.Access)
	conn := ch.conn
	ch.forget = func() { cfg.Forget(conn) }
	ch.onRelease = cfg.Release
	if err := cfg.Register(conn); err != nil {
		return nil, err
	}
	if _, err := ch.call(ctx, &amqp.ChannelOpen{}, true, amqp.MethodChannelOpenOk); err != nil {
		ch.closeConn()
		<-ch.done
		return nil, err
	}
	return ch, nil
}

// Conn is the Channel's direct connection, for the broker's tests.
func (ch *Channel) Conn() *session.Conn { return ch.conn }

// Error converts the session's error into amqp091-go's, as amqp091-go
// builds it from channel.close or connection.close: the error every door
// of the direct API returns.
func Error(e *amqp.Error) *amqp091.Error { return toError(e) }
