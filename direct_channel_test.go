package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

func TestDirectCloseIsGracefulAndFinal(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := brokertest.NewUnstarted(t, broker.Options{})
	ch, err := b.Channel(context.Background())
	require.NoError(t, err)
	closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation)) // never read
	_, err = ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	for range 3 {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("x")}))
	}
	msgs, err := ch.Consume("q", "", false, false, false, false, nil) // never read either
	require.NoError(t, err)

	require.NoError(t, ch.Close()) // returns although nobody reads
	require.True(t, ch.IsClosed())
	e, ok := <-closes
	require.False(t, ok, "graceful close sends no error, got %v", e)
	// Both listener channels are closed: ranging over them ends.
	for range confirms {
	}
	for range msgs {
	}
	require.NoError(t, ch.Close(), "Close is idempotent")
	amqptest.RequireCode(t, ch.Qos(1, 0, false), amqp091.ChannelError)
	amqptest.RequireCode(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{}), amqp091.ChannelError)
	amqptest.RequireCode(t, ch.Ack(1, false), amqp091.ChannelError)
	_, ok = <-ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.False(t, ok, "a listener registered after close is closed at once")
	_, ok = <-ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	require.False(t, ok)

	// The unacked deliveries went back to the queue.
	ch2 := brokertest.Channel(t, b)
	q, err := ch2.QueueDeclarePassive("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 3, q.Messages)
}

func TestDirectBrokerCloseEndsChannels(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	ch, err := b.Channel(context.Background())
	require.NoError(t, err)
	closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
	_, err = ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	for range 10 {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("x")}))
	}
	msgs, err := ch.Consume("q", "", false, false, false, false, nil)
	require.NoError(t, err)
	_, _ = amqptest.Receive(t, msgs) // the pump now blocks on the next one

	require.NoError(t, b.Close())
	e, _ := amqptest.Receive(t, closes)
	require.NotNil(t, e)
	require.Equal(t, amqp091.ConnectionForced, e.Code)
	require.True(t, ch.IsClosed())
	_, err = ch.QueueDeclare("r", false, false, false, false, nil)
	amqptest.RequireCode(t, err, amqp091.ChannelError)
	require.NoError(t, ch.Close())
	_, err = b.Channel(context.Background())
	require.ErrorIs(t, err, broker.ErrClosed)
}

func TestDirectErrorsCloseTheChannel(t *testing.T) {
	tests := []struct {
		name string
		run  func(ch *broker.Channel) error
		code int
	}{
		{"404 passive declare", func(ch *broker.Channel) error {
			_, err := ch.QueueDeclarePassive("missing", false, false, false, false, nil)
			return err
		}, amqp091.NotFound},
		{"404 publish to a missing exchange", func(ch *broker.Channel) error {
			return ch.PublishWithContext(context.Background(), "missing", "k", false, false, amqp091.Publishing{})
		}, amqp091.NotFound},
		{"406 unknown delivery tag", func(ch *broker.Channel) error { return ch.Ack(5, false) }, amqp091.PreconditionFailed},
		{"406 nack of unknown tag", func(ch *broker.Channel) error { return ch.Nack(5, false, true) }, amqp091.PreconditionFailed},
		{"406 oversized message", func(ch *broker.Channel) error {
			return ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: make([]byte, 2048)})
		}, amqp091.PreconditionFailed},
		{"530 reused consumer tag", func(ch *broker.Channel) error {
			if _, err := ch.Consume("q", "tag", false, false, false, false, nil); err != nil {
				return err
			}
			_, err := ch.Consume("q", "tag", false, false, false, false, nil)
			return err
		}, amqp091.NotAllowed},
		{"540 recover without requeue closes the connection", func(ch *broker.Channel) error { return ch.Recover(false) }, amqp091.NotImplemented},
		{"406 tx and confirm", func(ch *broker.Channel) error {
			if err := ch.Tx(); err != nil {
				return err
			}
			return ch.Confirm(false)
		}, amqp091.PreconditionFailed},
		{"406 commit outside tx", func(ch *broker.Channel) error { return ch.TxCommit() }, amqp091.PreconditionFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			amqptest.CheckGoroutines(t)
			b := brokertest.NewUnstarted(t, broker.Options{MaxMessageSize: 1024})
			ch := brokertest.Channel(t, b)
			_, err := ch.QueueDeclare("q", false, false, false, false, nil)
			require.NoError(t, err)
			closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
			err = tt.run(ch)
			amqptest.RequireCode(t, err, tt.code)
			e, _ := amqptest.Receive(t, closes)
			require.NotNil(t, e)
			require.Equal(t, tt.code, e.Code)
			require.Equal(t, e.Code < 500, e.Recover, "soft errors are recoverable")
			require.True(t, ch.IsClosed())
			_, err = ch.QueueDeclare("q", false, false, false, false, nil)
			require.Equal(t, amqp091.ErrClosed, err)
		})
	}
}

func TestDirectExclusiveQueueBelongsToTheChannel(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{})
	owner := brokertest.Channel(t, b)
	_, err := owner.QueueDeclare("excl", false, false, true, false, nil)
	require.NoError(t, err)
	other := brokertest.Channel(t, b)
	_, err = other.QueueDeclare("excl", false, false, false, false, nil)
	amqptest.RequireCode(t, err, amqp091.ResourceLocked)
	require.NoError(t, owner.Close())
	third := brokertest.Channel(t, b)
	_, err = third.QueueDeclarePassive("excl", false, false, false, false, nil)
	amqptest.RequireCode(t, err, amqp091.NotFound)
}

func TestDirectCopiesBodies(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{})
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	body := []byte("original")
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: body}))
	copy(body, "CHANGED!")
	d, ok, err := ch.Get("q", false)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "original", string(d.Body))
	copy(d.Body, "scribble")
	require.NoError(t, d.Nack(false, true))
	d, ok, err = ch.Get("q", false)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, d.Redelivered)
	require.Equal(t, "original", string(d.Body))
	require.Equal(t, uint64(2), d.DeliveryTag)
}

// TestDirectConsumerBufferIsUnbounded publishes far more than any
// channel buffer before reading: the queue never waits for the reader and
// order is kept.
func TestDirectConsumerBufferIsUnbounded(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{})
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	msgs, err := ch.Consume("q", "c", true, false, false, false, nil)
	require.NoError(t, err)
	const n = 2000
	for i := range n {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: fmt.Appendf(nil, "%d", i)}))
	}
	for i := range n {
		d, ok := amqptest.Receive(t, msgs)
		require.True(t, ok)
		require.Equal(t, fmt.Sprint(i), string(d.Body))
		require.Equal(t, uint64(i+1), d.DeliveryTag)
	}
	require.NoError(t, ch.Cancel("c", false))
	_, ok := amqptest.Receive(t, msgs)
	require.False(t, ok)
}

func TestDirectConsumeWithContext(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := brokertest.NewUnstarted(t, broker.Options{})
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	msgs, err := ch.ConsumeWithContext(ctx, "q", "c", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("a")}))
	d, _ := amqptest.Receive(t, msgs)
	cancel()
	_, ok := amqptest.Receive(t, msgs)
	require.False(t, ok, "cancelling the context cancels the consumer")
	require.NoError(t, d.Ack(false), "its deliveries can still be acked")

	_, err = ch.ConsumeWithContext(ctx, "q", "d", false, false, false, false, nil)
	require.ErrorIs(t, err, context.Canceled)

	// A watcher that never fires does not outlive the channel.
	live, stop := context.WithCancel(context.Background())
	defer stop()
	_, err = ch.ConsumeWithContext(live, "q", "e", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Close())
}

// TestDirectConfirmsAndReturnsInOrder checks what the broker promises:
// confirms in publish order, one each, and a return before its publish's
// confirm (returns of unroutable publishes may overtake the confirms of
// earlier ones, which wait for their queue, as on the wire).
func TestDirectConfirmsAndReturnsInOrder(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{})
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation)) // unbuffered: the notifier waits
	returns := ch.NotifyReturn(make(chan amqp091.Return))
	const n = 500
	type seen struct {
		confirms []uint64
		returnAt map[string]int // body -> confirms seen before the return
	}
	done := make(chan seen)
	go func() {
		s := seen{returnAt: make(map[string]int)}
		for range n + n/10 {
			select {
			case c := <-confirms:
				if c.Ack {
					s.confirms = append(s.confirms, c.DeliveryTag)
				}
			case r := <-returns:
				s.returnAt[string(r.Body)] = len(s.confirms)
			}
		}
		done <- s
	}()
	var wantConfirms []uint64
	for i := range n {
		key := "q"
		if i%10 == 0 {
			key = "nowhere"
		}
		wantConfirms = append(wantConfirms, uint64(i+1))
		require.NoError(t, ch.PublishWithContext(context.Background(), "", key, true, false, amqp091.Publishing{Body: fmt.Appendf(nil, "%d", i)}))
	}
	got, _ := amqptest.Receive(t, done)
	require.Equal(t, wantConfirms, got.confirms)
	require.Len(t, got.returnAt, n/10)
	for i := 0; i < n; i += 10 {
		before, ok := got.returnAt[fmt.Sprint(i)]
		require.True(t, ok, "return of %d", i)
		require.LessOrEqual(t, before, i, "return of publish %d after its confirm", i+1)
	}
}

// TestDirectConcurrentUse publishes, consumes and acks from several
// goroutines on one channel.
func TestDirectConcurrentUse(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := brokertest.NewUnstarted(t, broker.Options{})
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Qos(50, 0, false))
	msgs, err := ch.Consume("q", "c", false, false, false, false, nil)
	require.NoError(t, err)
	const publishers, each = 4, 250
	errs := make(chan error, publishers+1)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				if err := ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: fmt.Appendf(nil, "%d-%d", p, i)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	seen := make(map[string]bool)
	for range publishers * each {
		d, ok := amqptest.Receive(t, msgs)
		require.True(t, ok)
		require.False(t, seen[string(d.Body)], "duplicate %s", d.Body)
		seen[string(d.Body)] = true
		wg.Go(func() {
			if err := d.Ack(false); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	q, err := ch.QueueDeclarePassive("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 0, q.Messages)
}

func TestDirectVHostAndArguments(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{VHosts: []string{"tenant"}})
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err, "opens the first vhost when / is not served")

	empty := brokertest.NewUnstarted(t, broker.Options{VHosts: []string{}})
	_, err = empty.Channel(context.Background())
	require.Error(t, err)

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = b.Channel(canceled)
	require.ErrorIs(t, err, context.Canceled)

	require.Error(t, ch.Qos(-1, 0, false))
	_, err = ch.QueueDeclare("bad", false, false, false, false, amqp091.Table{"x": struct{}{}})
	require.Error(t, err, "arguments are validated as amqp091-go does")
	require.False(t, ch.IsClosed(), "a client-side check does not close the channel")
	require.Error(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Headers: amqp091.Table{"x": struct{}{}}}))
	require.Error(t, ch.PublishWithContext(canceled, "", "q", false, false, amqp091.Publishing{}))

	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	require.NotEmpty(t, q.Name, "server-named queue")
	require.NoError(t, ch.QueueBind("", "k", "amq.direct", false, nil), "\"\" is the last declared queue")
	_, err = ch.QueueDeclare("nowait", false, false, false, true, nil)
	require.NoError(t, err)
	q, err = ch.QueueDeclarePassive("nowait", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, "nowait", q.Name)
}

// TestDirectBrokerCloseUnderLoad closes the broker while direct channels
// publish, consume and ack from their own goroutines: everything stops,
// every call after the close reports it, and nothing leaks.
func TestDirectBrokerCloseUnderLoad(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := brokertest.NewUnstarted(t, broker.Options{})
	ctx := context.Background()
	type pair struct {
		ch   *broker.Channel
		name string
		msgs <-chan amqp091.Delivery
	}
	var pairs []pair
	for i := range 8 {
		ch, err := b.Channel(ctx)
		require.NoError(t, err)
		q := i % 4 // two channels per queue; queues 0 and 2 durable
		name := fmt.Sprintf("q%d", q)
		_, err = ch.QueueDeclare(name, q%2 == 0, false, false, false, nil)
		require.NoError(t, err)
		msgs, err := ch.Consume(name, "", false, false, false, false, nil)
		require.NoError(t, err)
		pairs = append(pairs, pair{ch, name, msgs})
	}
	const each = 500 // bounded: the broker has no publisher flow control yet
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(pairs))
	received := make(chan struct{}, 1)
	for _, p := range pairs {
		wg.Go(func() {
			for range each {
				if err := p.ch.PublishWithContext(ctx, "", p.name, false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for d := range p.msgs {
				select {
				case received <- struct{}{}:
				default:
				}
				if err := d.Ack(false); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	_, _ = amqptest.Receive(t, received) // traffic flows: now close
	require.NoError(t, b.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		var ae *amqp091.Error
		require.ErrorAs(t, err, &ae)
		require.Contains(t, []int{amqp091.ChannelError, amqp091.ConnectionForced}, ae.Code, "%v", err)
	}
	for _, p := range pairs {
		require.True(t, p.ch.IsClosed())
	}
}

// TestDirectCloseRequeuesBeforeReturning: once Close returns, what the
// channel held unacked is back in its queue ahead of any later request,
// from any connection: a get on another channel right after the close
// finds the same message, redelivered (the management API's get with
// ack_requeue_true relies on it).
func TestDirectCloseRequeuesBeforeReturning(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{})
	ctx := context.Background()
	other := brokertest.Channel(t, b)
	_, err := other.QueueDeclare("held", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, other.PublishWithContext(ctx, "", "held", false, false, amqp091.Publishing{Body: []byte("a")}))
	for i := range 200 {
		ch, err := b.Channel(ctx)
		require.NoError(t, err)
		d, ok, err := ch.Get("held", false)
		require.NoError(t, err)
		require.True(t, ok, "round %d", i)
		require.Equal(t, "a", string(d.Body))
		require.NoError(t, ch.Close())
		_, ok, err = other.Get("held", true)
		require.NoError(t, err)
		require.True(t, ok, "round %d: the close's requeue came after the next get", i)
		require.NoError(t, other.PublishWithContext(ctx, "", "held", false, false, amqp091.Publishing{Body: []byte("a")}))
	}
}
