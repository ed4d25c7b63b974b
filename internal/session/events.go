package session

import (
	"fmt"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/events"
)

// The session's events (Config.Events): each helper is the one line its
// call site adds, and costs one atomic load while nobody subscribed to its
// kind. ConnectionCreated is emitted once a connection is open (open-ok
// sent; a direct connection is created open), ConnectionClosed when a
// connection that was open has ended and released everything, with the
// code and text of the close that ended it: the first connection.close
// either side sent (recordClose), else no code and why the server dropped
// it or the error that ended the socket.

// connEvent fills the connection's part of an event. The fields it reads
// are written by the reader before the connection is open and never after,
// so any goroutine may call it once the connection is open.
func (c *Conn) connEvent(k events.Kind) events.Event {
	e := events.Event{
		Kind:       k,
		VHost:      c.vhost,
		Connection: c.id,
		User:       c.user,
		Direct:     c.sink != nil,
	}
	if c.vh != nil {
		e.VHost = c.vh.Name() // "/" for a connection.open of ""
	}
	e.Name, _ = c.clientProperties["connection_name"].(string)
	if c.tr != nil {
		if a := c.tr.Peer().Remote; a != nil {
			e.Peer = a.String()
		}
	}
	return e
}

// emitOpened reports ConnectionCreated.
func (c *Conn) emitOpened() {
	if h := c.cfg.Events; h.On(events.ConnectionCreated) {
		e := c.connEvent(events.ConnectionCreated)
		h.Emit(e)
	}
}

// recordClose remembers why the connection ends, for ConnectionClosed:
// the first connection.close of either side (code and text), or the
// server dropping it without one (code 0: missed heartbeats, worded as
// RabbitMQ logs it). A later one changes nothing.
func (c *Conn) recordClose(e *amqp.Error) { c.closeCause.CompareAndSwap(nil, e) }

// recordMissedHeartbeats is recordClose for a connection the heartbeat
// monitor drops.
func (c *Conn) recordMissedHeartbeats(interval time.Duration) {
	c.recordClose(&amqp.Error{Text: fmt.Sprintf("missed heartbeats from client, timeout: %v", interval)})
}

// emitClosed reports ConnectionClosed for a connection that was open; err
// is why the connection ended when no connection.close was exchanged.
func (c *Conn) emitClosed(err error) {
	h := c.cfg.Events
	if connState(c.state.Load()) != stateOpen || !h.On(events.ConnectionClosed) {
		return
	}
	e := c.connEvent(events.ConnectionClosed)
	if cause := c.closeCause.Load(); cause != nil {
		e.Code, e.Reason = cause.Code, cause.Text
	} else if err != nil {
		e.Reason = err.Error()
	}
	h.Emit(e)
}

// emitConsumer reports ConsumerCreated or ConsumerDeleted (with why) for
// consumer tag on queue.
func (ch *Channel) emitConsumer(k events.Kind, tag, queue, reason string) {
	if h := ch.conn.cfg.Events; h.On(k) {
		e := ch.conn.connEvent(k)
		e.Channel, e.ConsumerTag, e.Queue, e.Reason = ch.id, tag, queue, reason
		h.Emit(e)
	}
}

// emitReturned reports MessageReturned for the basic.return of a publish
// (312 NO_ROUTE: mandatory and routed nowhere; immediate is refused).
func (ch *Channel) emitReturned(m *amqp.BasicPublish, props []byte) {
	if h := ch.conn.cfg.Events; h.On(events.MessageReturned) {
		e := ch.conn.connEvent(events.MessageReturned)
		e.Channel, e.Exchange, e.RoutingKey = ch.id, m.Exchange, m.RoutingKey
		e.MessageID = events.MessageID(props)
		e.Code, e.Reason = amqp.NoRoute, "NO_ROUTE"
		h.Emit(e)
	}
}
