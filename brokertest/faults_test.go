package brokertest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// reconnecting is the reconnect loop of amqp091-go's documentation
// (example_client_test.go): on NotifyClose it dials again, with a short
// backoff, declares its topology again and consumes again. got receives
// every body delivered (acked after it is sent).
type reconnecting struct {
	dial   func() (*amqp091.Connection, error)
	got    chan string
	ready  chan struct{} // one value per (re)connection that consumes
	stop   chan struct{}
	done   sync.WaitGroup
	mu     sync.Mutex
	conn   *amqp091.Connection
	closes []*amqp091.Error
}

func startReconnecting(t *testing.T, dial func() (*amqp091.Connection, error)) *reconnecting {
	r := &reconnecting{dial: dial, got: make(chan string, 100), ready: make(chan struct{}, 10), stop: make(chan struct{})}
	r.done.Add(1)
	go r.run()
	t.Cleanup(func() {
		close(r.stop)
		r.mu.Lock()
		if r.conn != nil {
			_ = r.conn.Close()
		}
		r.mu.Unlock()
		r.done.Wait()
	})
	return r
}

func (r *reconnecting) run() {
	defer r.done.Done()
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		conn, err := r.dial()
		if err != nil {
			select {
			case <-r.stop:
				return
			case <-time.After(10 * time.Millisecond):
				continue
			}
		}
		r.mu.Lock()
		r.conn = conn
		r.mu.Unlock()
		closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
		if err := r.session(conn); err == nil {
			r.ready <- struct{}{}
		}
		select {
		case e := <-closed:
			r.mu.Lock()
			r.closes = append(r.closes, e)
			r.mu.Unlock()
		case <-r.stop:
			return
		}
	}
}

// session declares the topology and starts consuming.
func (r *reconnecting) session(conn *amqp091.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if _, err := ch.QueueDeclare("work", true, false, false, false, nil); err != nil {
		return err
	}
	msgs, err := ch.Consume("work", "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	go func() {
		for d := range msgs {
			r.got <- string(d.Body)
			_ = d.Ack(false)
		}
	}()
	return nil
}

func (r *reconnecting) lastClose() *amqp091.Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.closes) == 0 {
		return nil
	}
	return r.closes[len(r.closes)-1]
}

// amqp091-go's reconnect loop rides out a restart, a crash and a
// connection closed from outside, over TCP and the socket-free door: each
// time it reconnects to the same address, declares again and gets the
// messages published meanwhile.
func TestLabReconnectLoop(t *testing.T) {
	for _, door := range []string{"tcp", "dial"} {
		t.Run(door, func(t *testing.T) {
			lab := brokertest.NewLab(t, broker.Options{})
			dial := func() (*amqp091.Connection, error) {
				cfg := amqp091.Config{Properties: amqp091.Table{"connection_name": "loop"}}
				if door == "dial" {
					cfg.Dial = lab.Dial
				}
				return amqp091.DialConfig(lab.URL(), cfg)
			}
			r := startReconnecting(t, dial)
			amqptest.Receive(t, r.ready)
			faults := []struct {
				name string
				do   func() error
				code int // the close the client saw; 0: none (dropped)
			}{
				{"restart", lab.Restart, amqp091.ConnectionForced},
				{"crash", lab.Crash, 0},
				{"close", func() error {
					n, err := lab.CloseConnections("loop", brokertest.ConnectionForced, brokertest.ManagementCloseReason)
					if n != 1 {
						return fmt.Errorf("closed %d connections", n)
					}
					return err
				}, amqp091.ConnectionForced},
			}
			pub := lab.DialAMQP(t, "publisher")
			for i, f := range faults {
				require.NoError(t, f.do(), f.name)
				amqptest.Receive(t, r.ready)
				e := r.lastClose()
				require.NotNil(t, e, f.name)
				if f.code != 0 {
					require.Equal(t, f.code, e.Code, f.name)
				} else {
					require.NotEqual(t, amqp091.ConnectionForced, e.Code, "%s: no connection.close", f.name)
				}
				if f.name != "close" {
					pub = lab.DialAMQP(t, "publisher") // the publisher's connection went down too
				}
				ch := amqptest.Channel(t, pub)
				body := fmt.Sprintf("after %s %d", f.name, i)
				amqptest.PublishConfirmed(t, ch, "work", true, body)
				got, _ := amqptest.Receive(t, r.got)
				require.Equal(t, body, got)
				// Its ack must land before the next fault, or the
				// message comes back (at least once, as it should).
				_, err := lab.WaitQueue(bounded(t), "work", func(s brokertest.QueueState) bool { return s.Ready == 0 && s.Unacked == 0 })
				require.NoError(t, err)
			}
		})
	}
}

// CloseConnections does what RabbitMQ's management API does to a
// connection: 320 CONNECTION_FORCED with the reason, and only to the
// connections named.
func TestLabCloseConnections(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{})
	a := lab.DialAMQP(t, "victim")
	b := lab.DialAMQP(t, "bystander")
	closed := a.NotifyClose(make(chan *amqp091.Error, 1))
	n, err := lab.CloseConnections("victim", brokertest.ConnectionForced, brokertest.ManagementCloseReason)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	e, _ := amqptest.Receive(t, closed)
	require.Equal(t, amqp091.ConnectionForced, e.Code)
	require.Equal(t, "CONNECTION_FORCED - Closed via management plugin", e.Reason)
	amqptest.RequireWorks(t, b)

	n, err = lab.CloseConnectionsWhere(func(c broker.ConnectionInfo) bool { return strings.HasPrefix(brokertest.ConnectionName(c), "by") }, brokertest.ConnectionForced, "bye")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = lab.CloseConnections("victim", brokertest.ConnectionForced, "again")
	require.NoError(t, err)
}

// ForceConsumerTimeout closes the channel as RabbitMQ's consumer timeout
// does, and what it held comes back redelivered.
func TestLabForceConsumerTimeout(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{})
	conn := lab.DialAMQP(t, "slow")
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "q", false)
	amqptest.PublishConfirmed(t, ch, "q", false, "m")
	msgs, err := ch.Consume("q", "", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Next(t, msgs)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, lab.ForceConsumerTimeout("slow", 1))
	e, _ := amqptest.Receive(t, closed)
	require.Equal(t, amqp091.PreconditionFailed, e.Code)
	require.Equal(t, "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 1800000 ms. This timeout value can be configured, see consumers doc guide to learn more", e.Reason)
	ch2 := amqptest.Channel(t, conn)
	d := amqptest.Get(t, ch2, "q", true)
	require.True(t, d.Redelivered)
	require.ErrorIs(t, lab.ForceConsumerTimeout("slow", 9), broker.ErrNotFound)
}

// RaiseAlarm blocks publishing connections (connection.blocked, with
// RabbitMQ's reason) until ClearAlarm, as a crossed watermark does; the
// held publish lands afterwards.
func TestLabAlarms(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{MemoryHighWatermark: -1})
	conn := lab.DialAMQP(t, "")
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "q", false)
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 2))
	lab.RaiseAlarm(broker.AlarmMemory)
	amqptest.PublishBodies(t, ch, "q", false, "held")
	b, _ := amqptest.Receive(t, blocked)
	require.Equal(t, amqp091.Blocking{Active: true, Reason: "low on memory"}, b)
	lab.ClearAlarm(broker.AlarmMemory)
	b, _ = amqptest.Receive(t, blocked)
	require.False(t, b.Active)
	_, err := lab.WaitQueue(bounded(t), "q", brokertest.Ready(1))
	require.NoError(t, err)
}

// Failed appends are nacked, as RabbitMQ nacks what it could not store;
// the next publish goes through.
func TestLabFailAppends(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{})
	ch := amqptest.ConfirmChannel(t, lab.DialAMQP(t, ""))
	amqptest.DeclareQueue(t, ch, "q", true)
	lab.FailAppends(1)
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("lost"), DeliveryMode: amqp091.Persistent})
	require.NoError(t, err)
	require.False(t, dc.Wait(), "nacked")
	amqptest.PublishMsg(t, ch, "", "q", amqp091.Publishing{Body: []byte("kept"), DeliveryMode: amqp091.Persistent})
	_, err = lab.WaitQueue(bounded(t), "q", brokertest.Ready(1))
	require.NoError(t, err)
	require.Equal(t, []string{"kept"}, amqptest.GetAll(t, ch, "q"))
}

// DiskFull raises the disk alarm (publishers blocked) and fails writes;
// DiskFreed undoes both.
func TestLabDiskFull(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{MemoryHighWatermark: -1})
	conn := lab.DialAMQP(t, "")
	ch := amqptest.ConfirmChannel(t, conn)
	amqptest.DeclareQueue(t, ch, "q", true)
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 2))
	lab.DiskFull()
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	amqptest.PublishBodies(t, ch, "q", true, "held")
	b, _ := amqptest.Receive(t, blocked)
	require.Equal(t, amqp091.Blocking{Active: true, Reason: "low on disk"}, b)
	require.Equal(t, []broker.Alarm{broker.AlarmDisk}, lab.Broker().Alarms())
	lab.DiskFreed()
	b, _ = amqptest.Receive(t, blocked)
	require.False(t, b.Active)
	c, _ := amqptest.Receive(t, confirms)
	require.True(t, c.Ack, "the held publish was stored once the disk had room")
	amqptest.Publish(t, ch, "", "q", "after")
}

// A hung store call holds the publish's confirm until it is released.
func TestLabHangStore(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{})
	ch := amqptest.ConfirmChannel(t, lab.DialAMQP(t, ""))
	amqptest.DeclareQueue(t, ch, "q", true)
	hang := lab.HangStore(brokertest.StoreAppend)
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("m"), DeliveryMode: amqp091.Persistent})
	require.NoError(t, err)
	<-hang.Arrived()
	select {
	case <-dc.Done():
		t.Fatal("confirmed while the store hangs")
	default:
	}
	hang.Release()
	require.True(t, dc.Wait())
}

// WaitQueue waits for counts without sleeping, follows restarts, and
// gives up with ctx.
func TestLabWaitQueue(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{})
	ch := amqptest.Channel(t, lab.DialAMQP(t, ""))
	amqptest.DeclareQueue(t, ch, "q", false)
	_, err := ch.Consume("q", "", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.PublishBodies(t, ch, "q", false, "a", "b")
	s, err := lab.WaitQueue(bounded(t), "q", brokertest.Unacked(2))
	require.NoError(t, err)
	require.Equal(t, brokertest.QueueState{Unacked: 2, Consumers: 1}, s)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = lab.WaitQueue(ctx, "q", brokertest.Consumers(5))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// Reset returns the Lab to a new one's state: no queues, no faults.
func TestLabReset(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{})
	for i := range 2 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			require.NoError(t, lab.Reset())
			conn := amqptest.Dial(t, lab.URL(), amqp091.Config{})
			require.False(t, amqptest.QueueExists(t, conn, "leftover"))
			ch := amqptest.Channel(t, conn)
			amqptest.DeclareQueue(t, ch, "leftover", true)
			amqptest.PublishConfirmed(t, ch, "leftover", true, "x")
			lab.FailAppends(0)
		})
	}
}

// The wire trace decodes each connection's frames both ways.
func TestLabTrace(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{})
	ch := amqptest.Channel(t, lab.DialAMQP(t, "traced"))
	amqptest.DeclareQueue(t, ch, "q", false)
	amqptest.PublishConfirmed(t, ch, "q", false, "hello")
	tr := lab.Trace()
	for _, want := range []string{"C> protocol header", "S> ch0 connection.start", "C> ch1 queue.declare", "C> ch1 basic.publish", "body 5 bytes", "S> ch1 basic.ack"} {
		require.Contains(t, tr, want)
	}
}

// failingTB is a testing.TB that reports the test failed and keeps what
// is logged and the cleanups registered, so a test can see what a Lab
// does for a failed test.
type failingTB struct {
	testing.TB
	logs     []string
	cleanups []func()
}

func (f *failingTB) Failed() bool            { return true }
func (f *failingTB) Log(args ...any)         { f.logs = append(f.logs, fmt.Sprint(args...)) }
func (f *failingTB) Logf(s string, a ...any) { f.logs = append(f.logs, fmt.Sprintf(s, a...)) }
func (f *failingTB) Cleanup(fn func())       { f.cleanups = append(f.cleanups, fn) }

// When the test fails, the Lab prints every connection's wire trace
// through t.Log at cleanup.
func TestLabPrintsTraceWhenTheTestFails(t *testing.T) {
	ftb := &failingTB{TB: t}
	lab := brokertest.NewLab(ftb, broker.Options{})
	ch := amqptest.Channel(t, lab.DialAMQP(t, "traced"))
	amqptest.DeclareQueue(t, ch, "printed", false)
	require.Empty(t, ftb.logs, "nothing is printed before the cleanup")
	for i := len(ftb.cleanups) - 1; i >= 0; i-- {
		ftb.cleanups[i]()
	}
	require.NotEmpty(t, ftb.logs)
	require.Contains(t, strings.Join(ftb.logs, "\n"), "C> ch1 queue.declare")
}

var errStalled = errors.New("stalled")

// The network faults, on both doors.
func TestLabNetworkFaults(t *testing.T) {
	for _, door := range []string{"tcp", "dial"} {
		t.Run(door, func(t *testing.T) {
			lab := brokertest.NewLab(t, broker.Options{})
			link := lab.NewLink("faulty")
			dial := func(t *testing.T, cfg amqp091.Config) *amqp091.Connection {
				if door == "dial" {
					cfg.Dial = link.Dial
				}
				return amqptest.Dial(t, link.URL(), cfg)
			}
			t.Run("latency", func(t *testing.T) {
				ch := amqptest.Channel(t, dial(t, amqp091.Config{}))
				link.Latency(20 * time.Millisecond)
				defer link.Latency(0)
				start := time.Now()
				amqptest.DeclareQueue(t, ch, "lat", false) // a round trip: >= 2 delays
				require.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
			})
			t.Run("bandwidth", func(t *testing.T) {
				ch := amqptest.Channel(t, dial(t, amqp091.Config{}))
				amqptest.DeclareQueue(t, ch, "bw", false)
				link.Bandwidth(100_000)
				defer link.Bandwidth(0)
				start := time.Now()
				amqptest.PublishConfirmed(t, ch, "bw", false, strings.Repeat("x", 20_000))
				require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
			})
			t.Run("partition", func(t *testing.T) {
				ch := amqptest.ConfirmChannel(t, dial(t, amqp091.Config{}))
				amqptest.DeclareQueue(t, ch, "part", false)
				link.Partition()
				published := make(chan error, 1)
				go func() {
					dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "part", false, false, amqp091.Publishing{Body: []byte("m")})
					if err == nil && !dc.Wait() {
						err = errors.New("nacked")
					}
					published <- err
				}()
				_, err := lab.WaitQueue(bounded(t), "part", brokertest.Ready(0))
				require.NoError(t, err)
				select {
				case <-published:
					t.Fatal("confirmed through a partition")
				default:
				}
				link.Heal()
				err, _ = amqptest.Receive(t, published)
				require.NoError(t, err)
				_, err = lab.WaitQueue(bounded(t), "part", brokertest.Ready(1))
				require.NoError(t, err)
			})
			t.Run("black hole", func(t *testing.T) {
				conn := dial(t, amqp091.Config{Heartbeat: time.Second})
				closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
				// amqp091-go clears its read deadline when the handshake
				// ends and sets it again on the next frame it reads: one
				// round trip first, or a black hole can start while the
				// client has no deadline and never notices.
				amqptest.Channel(t, conn)
				// Healed before the connection's cleanup closes it, even
				// when the test fails: a close into a black hole waits
				// forever for close-ok.
				t.Cleanup(link.Heal)
				link.BlackHole()
				e, _ := amqptest.Receive(t, closed) // the client's heartbeat notices
				require.NotNil(t, e)
				link.Heal()
				amqptest.RequireWorks(t, dial(t, amqp091.Config{}))
			})
			t.Run("cut", func(t *testing.T) {
				conn := dial(t, amqp091.Config{})
				ch := amqptest.Channel(t, conn)
				amqptest.DeclareQueue(t, ch, "cut", false)
				amqptest.PublishConfirmed(t, ch, "cut", false, "held")
				amqptest.Get(t, ch, "cut", false)
				closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
				link.Cut()
				e, _ := amqptest.Receive(t, closed)
				require.NotNil(t, e)
				require.NotEqual(t, amqp091.ConnectionForced, e.Code, "a cut sends no connection.close")
				// The broker sees the dead connection and requeues what
				// it held, as RabbitMQ does for a killed client.
				_, err := lab.WaitQueue(bounded(t), "cut", brokertest.Ready(1))
				require.NoError(t, err)
				d := amqptest.Get(t, amqptest.Channel(t, dial(t, amqp091.Config{})), "cut", true)
				require.True(t, d.Redelivered)
			})
			t.Run("reset", func(t *testing.T) {
				conn := dial(t, amqp091.Config{})
				ch := amqptest.Channel(t, conn)
				closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
				link.ResetAfter(100)
				defer link.ResetAfter(0)
				_, _ = ch.QueueDeclare("reset", false, false, false, false, amqp091.Table{"x-pad": strings.Repeat("p", 200)})
				e, _ := amqptest.Receive(t, closed)
				require.NotNil(t, e)
				require.NotEqual(t, amqp091.ConnectionForced, e.Code)
			})
		})
	}
}

// amqp091-go's own recovery (Config.Recovery, v1.13 and later) rides out a
// restart, a crash, a connection closed from outside and one the network
// dropped: it reconnects to the same address, declares the transient
// queue again, resumes its consumer on the same delivery channel, and the
// consumer gets what is published after each fault.
func TestLabAMQP091Recovery(t *testing.T) {
	for _, door := range []string{"tcp", "dial"} {
		t.Run(door, func(t *testing.T) {
			lab := brokertest.NewLab(t, broker.Options{})
			cfg := amqp091.Config{
				Properties: amqp091.Table{"connection_name": "recovering"},
				Recovery: &amqp091.Recovery{
					TopologyRecoveryMode: amqp091.TopologyRecoveryAllEnabled,
					ReconnectionConfig:   &amqp091.ReconnectionConfig{MaxRetryCount: 100, RetryInterval: 20 * time.Millisecond},
				},
			}
			if door == "dial" {
				cfg.Dial = lab.Dial
			}
			conn, err := amqp091.DialConfig(lab.URL(), cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			ch, err := conn.Channel()
			require.NoError(t, err)
			_, err = ch.QueueDeclare("recovered", false, false, false, false, nil)
			require.NoError(t, err)
			// Manual acks: a message delivered to the connection a fault
			// took down comes back and is delivered again, as RabbitMQ
			// does; with auto-ack it would be lost in flight.
			msgs, err := ch.Consume("recovered", "", false, false, false, false, nil)
			require.NoError(t, err)
			for i, fault := range []struct {
				name string
				do   func() error
			}{
				{"restart", lab.Restart},
				{"crash", lab.Crash},
				{"close", func() error {
					_, err := lab.CloseConnections("recovering", brokertest.ConnectionForced, brokertest.ManagementCloseReason)
					return err
				}},
				{"cut", func() error { lab.Net().Cut(); return nil }}, // the network drops it
			} {
				require.NoError(t, fault.do(), fault.name)
				// Recovered once the queue is back with its consumer.
				_, err := lab.WaitQueue(bounded(t), "recovered", brokertest.Consumers(1))
				require.NoError(t, err, fault.name)
				pub := amqptest.Channel(t, lab.DialAMQP(t, "publisher"))
				body := fmt.Sprintf("after %s %d", fault.name, i)
				amqptest.PublishConfirmed(t, pub, "recovered", false, body)
				// Earlier messages may come again (at least once) before it.
				for {
					d, _ := amqptest.Receive(t, msgs)
					_ = d.Ack(false) // may fail on a channel a fault closed: it comes back
					if string(d.Body) == body {
						break
					}
				}
			}
		})
	}
}
