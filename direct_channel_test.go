package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// newDirectBroker returns an unstarted in-memory broker closed on cleanup.
func newDirectBroker(t *testing.T, opts Options) *Broker {
	t.Helper()
	b, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

func openDirect(t *testing.T, b *Broker) *Channel {
	t.Helper()
	ch, err := b.Channel(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

// directReceive waits for a value; the timeout only turns a hang into a failure.
func directReceive[T any](t *testing.T, c <-chan T) (T, bool) {
	t.Helper()
	select {
	case v, ok := <-c:
		return v, ok
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing received in 10s")
		var zero T
		return zero, false
	}
}

func requireDirectCode(t *testing.T, err error, code int) {
	t.Helper()
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, code, ae.Code, "reason: %s", ae.Reason)
}

func TestDirectCloseIsGracefulAndFinal(t *testing.T) {
	checkGoroutines(t)
	b := newDirectBroker(t, Options{})
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
	requireDirectCode(t, ch.Qos(1, 0, false), amqp091.ChannelError)
	requireDirectCode(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{}), amqp091.ChannelError)
	requireDirectCode(t, ch.Ack(1, false), amqp091.ChannelError)
	_, ok = <-ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.False(t, ok, "a listener registered after close is closed at once")
	_, ok = <-ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	require.False(t, ok)

	// The unacked deliveries went back to the queue.
	ch2 := openDirect(t, b)
	q, err := ch2.QueueDeclarePassive("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 3, q.Messages)
}

func TestDirectBrokerCloseEndsChannels(t *testing.T) {
	checkGoroutines(t)
	b, err := New(Options{})
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
	_, _ = directReceive(t, msgs) // the pump now blocks on the next one

	require.NoError(t, b.Close())
	e, _ := directReceive(t, closes)
	require.NotNil(t, e)
	require.Equal(t, amqp091.ConnectionForced, e.Code)
	require.True(t, ch.IsClosed())
	_, err = ch.QueueDeclare("r", false, false, false, false, nil)
	requireDirectCode(t, err, amqp091.ChannelError)
	require.NoError(t, ch.Close())
	_, err = b.Channel(context.Background())
	require.ErrorIs(t, err, ErrClosed)
}

func TestDirectErrorsCloseTheChannel(t *testing.T) {
	tests := []struct {
		name string
		run  func(ch *Channel) error
		code int
	}{
		{"404 passive declare", func(ch *Channel) error {
			_, err := ch.QueueDeclarePassive("missing", false, false, false, false, nil)
			return err
		}, amqp091.NotFound},
		{"404 publish to a missing exchange", func(ch *Channel) error {
			return ch.PublishWithContext(context.Background(), "missing", "k", false, false, amqp091.Publishing{})
		}, amqp091.NotFound},
		{"406 unknown delivery tag", func(ch *Channel) error { return ch.Ack(5, false) }, amqp091.PreconditionFailed},
		{"406 nack of unknown tag", func(ch *Channel) error { return ch.Nack(5, false, true) }, amqp091.PreconditionFailed},
		{"406 oversized message", func(ch *Channel) error {
			return ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: make([]byte, 2048)})
		}, amqp091.PreconditionFailed},
		{"530 reused consumer tag", func(ch *Channel) error {
			if _, err := ch.Consume("q", "tag", false, false, false, false, nil); err != nil {
				return err
			}
			_, err := ch.Consume("q", "tag", false, false, false, false, nil)
			return err
		}, amqp091.NotAllowed},
		{"540 recover without requeue closes the connection", func(ch *Channel) error { return ch.Recover(false) }, amqp091.NotImplemented},
		{"406 tx and confirm", func(ch *Channel) error {
			if err := ch.Tx(); err != nil {
				return err
			}
			return ch.Confirm(false)
		}, amqp091.PreconditionFailed},
		{"406 commit outside tx", func(ch *Channel) error { return ch.TxCommit() }, amqp091.PreconditionFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			b := newDirectBroker(t, Options{MaxMessageSize: 1024})
			ch := openDirect(t, b)
			_, err := ch.QueueDeclare("q", false, false, false, false, nil)
			require.NoError(t, err)
			closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
			err = tt.run(ch)
			requireDirectCode(t, err, tt.code)
			e, _ := directReceive(t, closes)
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
	b := newDirectBroker(t, Options{})
	owner := openDirect(t, b)
	_, err := owner.QueueDeclare("excl", false, false, true, false, nil)
	require.NoError(t, err)
	other := openDirect(t, b)
	_, err = other.QueueDeclare("excl", false, false, false, false, nil)
	requireDirectCode(t, err, amqp091.ResourceLocked)
	require.NoError(t, owner.Close())
	third := openDirect(t, b)
	_, err = third.QueueDeclarePassive("excl", false, false, false, false, nil)
	requireDirectCode(t, err, amqp091.NotFound)
}

func TestDirectCopiesBodies(t *testing.T) {
	b := newDirectBroker(t, Options{})
	ch := openDirect(t, b)
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
	b := newDirectBroker(t, Options{})
	ch := openDirect(t, b)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	msgs, err := ch.Consume("q", "c", true, false, false, false, nil)
	require.NoError(t, err)
	const n = 2000
	for i := range n {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: fmt.Appendf(nil, "%d", i)}))
	}
	for i := range n {
		d, ok := directReceive(t, msgs)
		require.True(t, ok)
		require.Equal(t, fmt.Sprint(i), string(d.Body))
		require.Equal(t, uint64(i+1), d.DeliveryTag)
	}
	require.NoError(t, ch.Cancel("c", false))
	_, ok := directReceive(t, msgs)
	require.False(t, ok)
}

func TestDirectConsumeWithContext(t *testing.T) {
	checkGoroutines(t)
	b := newDirectBroker(t, Options{})
	ch := openDirect(t, b)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	msgs, err := ch.ConsumeWithContext(ctx, "q", "c", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("a")}))
	d, _ := directReceive(t, msgs)
	cancel()
	_, ok := directReceive(t, msgs)
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
	b := newDirectBroker(t, Options{})
	ch := openDirect(t, b)
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
	got, _ := directReceive(t, done)
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
	checkGoroutines(t)
	b := newDirectBroker(t, Options{})
	ch := openDirect(t, b)
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
		d, ok := directReceive(t, msgs)
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
	b := newDirectBroker(t, Options{VHosts: []string{"tenant"}})
	ch := openDirect(t, b)
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err, "opens the first vhost when / is not served")

	empty := newDirectBroker(t, Options{VHosts: []string{}})
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
	checkGoroutines(t)
	b := newDirectBroker(t, Options{})
	ctx := context.Background()
	type pair struct {
		ch   *Channel
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
	_, _ = directReceive(t, received) // traffic flows: now close
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
