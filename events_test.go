package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/events"
)

// eventsChannel is what the events tests do on a channel: amqp091-go's
// Channel and the broker's direct Channel both have it.
type eventsChannel interface {
	drainChannel
	Cancel(consumer string, noWait bool) error
	QueueDelete(name string, ifUnused, ifEmpty, noWait bool) (int, error)
	NotifyReturn(c chan amqp091.Return) chan amqp091.Return
	QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error
	QueueUnbind(name, key, exchange string, args amqp091.Table) error
	ExchangeBind(destination, key, source string, noWait bool, args amqp091.Table) error
}

// eventsDoor opens a channel on a connection of its own through one of
// the broker's doors, and says what that connection's events carry.
type eventsDoor struct {
	name   string
	direct bool
	// closeText is the text of the connection.close the client sends,
	// peer what its events' Peer starts with.
	closeText, peer string
	// open returns the channel and the func that closes its connection.
	open func(t *testing.T, b *Broker) (eventsChannel, func() error)
}

var eventsDoors = []eventsDoor{
	{"amqp091 over TCP", false, "kthxbai", "127.0.0.1:", func(t *testing.T, b *Broker) (eventsChannel, func() error) {
		conn := amqptest.Dial(t, b.URL(), amqp091.Config{Properties: amqp091.Table{"connection_name": "events-test"}})
		return amqptest.Channel(t, conn), conn.Close
	}},
	{"amqp091 through Dial", false, "kthxbai", "pipe", func(t *testing.T, b *Broker) (eventsChannel, func() error) {
		conn := amqptest.Dial(t, b.URL(), amqp091.Config{Dial: b.Dial, Properties: amqp091.Table{"connection_name": "events-test"}})
		return amqptest.Channel(t, conn), conn.Close
	}},
	{"direct Channel", true, "closed by the application", "", func(t *testing.T, b *Broker) (eventsChannel, func() error) {
		ch, err := b.Channel(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() { _ = ch.Close() })
		return ch, ch.Close
	}},
}

// conn returns e with the fields of an event of door's connection.
func (d eventsDoor) conn(e Event) Event {
	e.VHost, e.User, e.Direct = "/", "guest", d.direct
	if !d.direct {
		e.ConnectionName = "events-test"
	}
	return e
}

// eventsEnv is one scenario's broker, channel and subscription.
type eventsEnv struct {
	t         *testing.T
	b         *Broker
	clk       *clock.Fake
	door      eventsDoor
	ch        eventsChannel
	closeConn func() error
	confirms  chan amqp091.Confirmation
	evs       <-chan Event
	got       []Event // read so far
}

// next reads the next event (the scenario needs one of its fields).
func (env *eventsEnv) next() Event {
	env.t.Helper()
	select {
	case e, ok := <-env.evs:
		require.True(env.t, ok, "events channel closed")
		env.got = append(env.got, e)
		return e
	case <-time.After(10 * time.Second):
		env.t.Fatalf("no event after %v", env.got)
		return Event{}
	}
}

// publish publishes a message with id to key on the default exchange and
// waits for its confirm, so the queue has it.
func (env *eventsEnv) publish(key, id string) {
	env.t.Helper()
	require.NoError(env.t, env.ch.PublishWithContext(env.t.Context(), "", key, false, false, amqp091.Publishing{MessageId: id}))
	select {
	case c := <-env.confirms:
		require.True(env.t, c.Ack)
	case <-time.After(10 * time.Second):
		env.t.Fatal("no confirm")
	}
}

// get takes one message from queue, unacked.
func (env *eventsEnv) get(queue string) amqp091.Delivery {
	env.t.Helper()
	d, ok, err := env.ch.Get(queue, false)
	require.NoError(env.t, err)
	require.True(env.t, ok, "queue %s is empty", queue)
	return d
}

func (env *eventsEnv) declare(name string, args amqp091.Table) {
	env.t.Helper()
	_, err := env.ch.QueueDeclare(name, false, false, false, false, args)
	require.NoError(env.t, err)
}

// Every kind, through every door: the events a scenario causes, field by
// field. Connection and Peer are checked for presence (they name the
// connection), Time against the broker's (fake) clock.
func TestEventsEndToEnd(t *testing.T) {
	type scenario struct {
		name  string
		kinds []EventKind
		run   func(env *eventsEnv) []Event
	}
	queued := func(kind EventKind, queue, key, id, reason, dlx string, discarded bool) Event {
		return Event{Kind: kind, VHost: "/", Queue: queue, RoutingKey: key, MessageID: id,
			Reason: reason, DeadLetterExchange: dlx, Discarded: discarded}
	}
	scenarios := []scenario{
		{"connection closed by the client", []EventKind{ConnectionCreated, ConnectionClosed}, func(env *eventsEnv) []Event {
			require.NoError(env.t, env.closeConn())
			return []Event{
				env.door.conn(Event{Kind: ConnectionCreated}),
				env.door.conn(Event{Kind: ConnectionClosed, Code: 200, Reason: env.door.closeText}),
			}
		}},
		{"connection closed by the server", []EventKind{ConnectionCreated, ConnectionClosed}, func(env *eventsEnv) []Event {
			created := env.next()
			require.NoError(env.t, env.b.CloseConnection(created.Connection, 320, "bye"))
			return []Event{
				env.door.conn(Event{Kind: ConnectionCreated}),
				env.door.conn(Event{Kind: ConnectionClosed, Code: 320, Reason: "CONNECTION_FORCED - bye"}),
			}
		}},
		{"consumer cancelled by the client", []EventKind{ConsumerCreated, ConsumerDeleted}, func(env *eventsEnv) []Event {
			env.declare("q", nil)
			_, err := env.ch.Consume("q", "c1", false, false, false, false, nil)
			require.NoError(env.t, err)
			require.NoError(env.t, env.ch.Cancel("c1", false))
			return []Event{
				env.door.conn(Event{Kind: ConsumerCreated, Channel: 1, ConsumerTag: "c1", Queue: "q"}),
				env.door.conn(Event{Kind: ConsumerDeleted, Channel: 1, ConsumerTag: "c1", Queue: "q", Reason: "basic.cancel"}),
			}
		}},
		{"consumer ended by its connection closing", []EventKind{ConsumerDeleted}, func(env *eventsEnv) []Event {
			env.declare("q", nil)
			_, err := env.ch.Consume("q", "c1", false, false, false, false, nil)
			require.NoError(env.t, err)
			require.NoError(env.t, env.closeConn())
			return []Event{
				env.door.conn(Event{Kind: ConsumerDeleted, Channel: 1, ConsumerTag: "c1", Queue: "q", Reason: "channel closed"}),
			}
		}},
		{"consumer cancelled by the server: queue deleted", []EventKind{ConsumerDeleted}, func(env *eventsEnv) []Event {
			env.declare("q", nil)
			_, err := env.ch.Consume("q", "c1", false, false, false, false, nil)
			require.NoError(env.t, err)
			_, err = env.ch.QueueDelete("q", false, false, false)
			require.NoError(env.t, err)
			return []Event{
				env.door.conn(Event{Kind: ConsumerDeleted, Channel: 1, ConsumerTag: "c1", Queue: "q", Reason: "queue deleted"}),
			}
		}},
		{"message returned", []EventKind{MessageReturned}, func(env *eventsEnv) []Event {
			returns := env.ch.NotifyReturn(make(chan amqp091.Return, 1))
			require.NoError(env.t, env.ch.PublishWithContext(env.t.Context(), "", "nowhere", true, false, amqp091.Publishing{MessageId: "m-1", Body: []byte("body")}))
			r := <-returns
			require.Equal(env.t, "m-1", r.MessageId)
			return []Event{
				env.door.conn(Event{Kind: MessageReturned, Channel: 1, RoutingKey: "nowhere", MessageID: "m-1", Code: 312, Reason: "NO_ROUTE"}),
			}
		}},
		{"bindings created and deleted", []EventKind{BindingCreated, BindingDeleted}, func(env *eventsEnv) []Event {
			env.declare("q", nil)
			require.NoError(env.t, env.ch.QueueBind("q", "k", "amq.direct", false, amqp091.Table{"a": "b"}))
			require.NoError(env.t, env.ch.ExchangeBind("amq.topic", "#", "amq.fanout", false, nil))
			require.NoError(env.t, env.ch.QueueUnbind("q", "k", "amq.direct", amqp091.Table{"a": "b"}))
			require.NoError(env.t, env.ch.QueueBind("q", "k2", "amq.direct", false, nil))
			_, err := env.ch.QueueDelete("q", false, false, false)
			require.NoError(env.t, err)
			bound := func(kind EventKind, src, key, dest, destKind string, args amqp.Table) Event {
				return Event{Kind: kind, VHost: "/", Exchange: src, RoutingKey: key, Destination: dest, DestinationKind: destKind, Arguments: args}
			}
			return []Event{
				bound(BindingCreated, "amq.direct", "k", "q", "queue", amqp.Table{"a": "b"}),
				bound(BindingCreated, "amq.fanout", "#", "amq.topic", "exchange", nil),
				bound(BindingDeleted, "amq.direct", "k", "q", "queue", amqp.Table{"a": "b"}),
				bound(BindingCreated, "amq.direct", "k2", "q", "queue", nil),
				bound(BindingDeleted, "amq.direct", "k2", "q", "queue", nil), // with its queue
			}
		}},
		{"rejected to a dead-letter exchange", []EventKind{MessageDeadLettered}, func(env *eventsEnv) []Event {
			env.declare("dead", nil)
			env.declare("q", amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
			env.publish("q", "m-1")
			require.NoError(env.t, env.get("q").Nack(false, false))
			return []Event{queued(MessageDeadLettered, "q", "q", "m-1", "rejected", "", false)}
		}},
		{"rejected without a dead-letter exchange", []EventKind{MessageDeadLettered}, func(env *eventsEnv) []Event {
			env.declare("q", nil)
			env.publish("q", "m-1")
			require.NoError(env.t, env.get("q").Reject(false))
			return []Event{queued(MessageDeadLettered, "q", "q", "m-1", "rejected", "", true)}
		}},
		{"dropped from the head: maxlen", []EventKind{MessageDeadLettered}, func(env *eventsEnv) []Event {
			env.declare("q", amqp091.Table{"x-max-length": int32(1)})
			env.publish("q", "m-1")
			env.publish("q", "m-2")
			return []Event{queued(MessageDeadLettered, "q", "q", "m-1", "maxlen", "", true)}
		}},
		{"over the delivery limit", []EventKind{MessageDeadLettered}, func(env *eventsEnv) []Event {
			env.declare("q", amqp091.Table{"x-delivery-limit": int32(0), "x-dead-letter-exchange": "amq.fanout"})
			env.publish("q", "m-1")
			require.NoError(env.t, env.get("q").Nack(false, true))
			return []Event{queued(MessageDeadLettered, "q", "q", "m-1", "delivery_limit", "amq.fanout", false)}
		}},
		{"expired and dropped", []EventKind{MessageExpired, MessageDeadLettered}, func(env *eventsEnv) []Event {
			env.declare("q", amqp091.Table{"x-message-ttl": int32(1000)})
			env.publish("q", "m-1")
			env.clk.Advance(2 * time.Second)
			return []Event{queued(MessageExpired, "q", "q", "m-1", "expired", "", true)}
		}},
		{"expired to a dead-letter exchange", []EventKind{MessageExpired}, func(env *eventsEnv) []Event {
			env.declare("q", amqp091.Table{"x-message-ttl": int32(1000), "x-dead-letter-exchange": "amq.fanout"})
			env.publish("q", "m-1")
			env.clk.Advance(2 * time.Second)
			return []Event{queued(MessageExpired, "q", "q", "m-1", "expired", "amq.fanout", false)}
		}},
	}
	for _, door := range eventsDoors {
		t.Run(door.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
					clk := clock.NewFake(start)
					b := startBroker(t, Options{Clock: clk})
					env := &eventsEnv{t: t, b: b, clk: clk, door: door, evs: b.Events(t.Context(), 64, sc.kinds...)}
					env.ch, env.closeConn = door.open(t, b)
					require.NoError(t, env.ch.Confirm(false))
					env.confirms = env.ch.NotifyPublish(make(chan amqp091.Confirmation, 16))
					want := sc.run(env)
					for len(env.got) < len(want) {
						env.next()
					}
					for i := range env.got {
						e := &env.got[i]
						// A fake clock's Advance runs a due timer at its deadline.
						require.False(t, e.Time.Before(start) || e.Time.After(clk.Now()), "event %d stamped %v, not on the broker's clock (%v to %v)", i, e.Time, start, clk.Now())
						require.Zero(t, e.Missed)
						if (e.Queue != "" || e.DestinationKind != "") && e.User == "" { // a queue's or a binding's event
							require.Empty(t, e.Connection)
						} else {
							require.NotEmpty(t, e.Connection)
						}
						if e.User == "" || door.peer == "" {
							require.Empty(t, e.Peer)
						} else {
							require.True(t, strings.HasPrefix(e.Peer, door.peer), "peer %q", e.Peer)
						}
						e.Time, e.Connection, e.Peer = time.Time{}, "", ""
					}
					require.Equal(t, want, env.got)
					require.NoError(t, b.WaitIdle(t.Context()))
					select {
					case e := <-env.evs:
						t.Fatalf("unexpected event %+v", e)
					default:
					}
				})
			}
		})
	}
}

// A subscriber that does not read loses events without slowing anyone,
// and learns from its next event how many; another subscriber that keeps
// up gets them all.
func TestEventsMissedWhenNotRead(t *testing.T) {
	const n = 50
	tests := []struct {
		name   string
		buffer int
	}{
		{"buffer 1", 1},
		{"buffer 8", 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, Options{})
			slow := b.Events(t.Context(), tc.buffer, MessageReturned)
			all := b.Events(t.Context(), 2*n, MessageReturned)
			ch, err := b.Channel(t.Context())
			require.NoError(t, err)
			returns := ch.NotifyReturn(make(chan amqp091.Return, n+1))
			publish := func(i int) {
				require.NoError(t, ch.PublishWithContext(t.Context(), "", "nowhere", true, false,
					amqp091.Publishing{MessageId: fmt.Sprint("m-", i)}))
				<-returns
			}
			for i := range n {
				publish(i)
			}
			for i := range tc.buffer {
				e := <-slow
				require.Equal(t, fmt.Sprint("m-", i), e.MessageID)
				require.Zero(t, e.Missed)
			}
			publish(n)
			e := <-slow
			require.Equal(t, fmt.Sprint("m-", n), e.MessageID)
			require.Equal(t, uint64(n-tc.buffer), e.Missed, "the events lost before this one")
			for i := range n + 1 {
				e := <-all
				require.Equal(t, fmt.Sprint("m-", i), e.MessageID)
				require.Zero(t, e.Missed)
			}
		})
	}
}

// A subscription ends when its context ends or the broker closes: its
// channel is closed and nothing of it is left in the broker (no
// goroutine, no subscriber to serve).
func TestEventsUnsubscribe(t *testing.T) {
	tests := []struct {
		name string
		end  func(cancel context.CancelFunc, b *Broker)
	}{
		{"context cancelled", func(cancel context.CancelFunc, _ *Broker) { cancel() }},
		{"broker closed", func(_ context.CancelFunc, b *Broker) { require.NoError(t, b.Close()) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			amqptest.CheckGoroutines(t)
			b := startBroker(t, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			evs := b.Events(ctx, 4)
			require.True(t, b.events.On(events.ConnectionCreated))
			tc.end(cancel, b)
			requireEventsClosed(t, evs)
			require.Eventually(t, func() bool { return !b.events.On(events.ConnectionCreated) },
				5*time.Second, time.Millisecond, "the subscriber is gone")
		})
	}
}

// Close reports the connections it closes before it closes the events
// channel, and a subscription after Close is closed at once.
func TestEventsBrokerClose(t *testing.T) {
	b, err := New(Options{})
	require.NoError(t, err)
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	evs := b.Events(context.Background(), 16, ConnectionClosed)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, b.Close())
	e, ok := <-evs
	require.True(t, ok)
	require.Equal(t, ConnectionClosed, e.Kind)
	require.Equal(t, uint16(320), e.Code)
	require.Equal(t, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'", e.Reason)
	requireEventsClosed(t, evs)
	require.Equal(t, 320, (<-closed).Code)
	requireEventsClosed(t, b.Events(context.Background(), 1))
}

func requireEventsClosed(t *testing.T, evs <-chan Event) {
	t.Helper()
	select {
	case e, ok := <-evs:
		require.False(t, ok, "unexpected event %+v", e)
	case <-time.After(10 * time.Second):
		t.Fatal("events channel not closed")
	}
}

func TestEventKindString(t *testing.T) {
	tests := []struct {
		kind EventKind
		want string
	}{
		{ConnectionCreated, "connection.created"},
		{ConnectionClosed, "connection.closed"},
		{ConsumerCreated, "consumer.created"},
		{ConsumerDeleted, "consumer.deleted"},
		{MessageReturned, "message.returned"},
		{MessageDeadLettered, "message.dead_lettered"},
		{MessageExpired, "message.expired"},
		{BindingCreated, "binding.created"},
		{BindingDeleted, "binding.deleted"},
		{0, "EventKind(0)"},
		{99, "EventKind(99)"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, tc.kind.String())
			if tc.kind >= ConnectionCreated && tc.kind <= BindingDeleted {
				require.Equal(t, tc.kind, eventKinds[sourceKind(tc.kind)], "every public kind maps to a source kind and back")
			} else {
				require.Zero(t, sourceKind(tc.kind))
			}
		})
	}
}
