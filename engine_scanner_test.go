package broker

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/scan"
	"github.com/warrenmq/broker/unacked"
)

// A delivery acked in time never costs its channel, however late the pass.
func TestEngineConsumerTimeoutSparesSettledDeliveries(t *testing.T) {
	const timeout = 100 * time.Millisecond
	b := startBroker(t, Options{ConsumerTimeout: timeout})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, ch, "quick", false)
	amqptest.PublishConfirmed(t, ch, "quick", false, "a")
	d := amqptest.Get(t, ch, "quick", false)
	require.NoError(t, d.Ack(false))
	waitStats(t, b, "quick", func(st queue.Stats) bool { return st.Unacked == 0 })
	time.Sleep(2 * timeout) // older than the timeout, had it stayed unacked
	require.NoError(t, b.scan.Pass(context.Background()))
	require.False(t, ch.IsClosed())
	amqptest.DeclareQueue(t, ch, "still-open", false)
}

// The scanner requeues deliveries nobody will settle: here one claimed for
// a connection that does not exist.
func TestEngineScannerRequeuesOrphans(t *testing.T) {
	b := startBroker(t, Options{})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, ch, "orphans", true)
	amqptest.PublishConfirmed(t, ch, "orphans", true, "a", "b")
	vh, _ := b.vhosts.Lookup("/")
	q, err := vh.Queue("", "orphans")
	require.NoError(t, err)
	ctx := context.Background()
	m, _, ok, err := q.Get(ctx, queue.Owner{Connection: "ghost#1", Channel: 1}, false)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "a", string(m.Body))
	require.Equal(t, queue.Stats{Ready: 1, Unacked: 1}, queueStats(t, b, "orphans"))

	require.NoError(t, b.scan.Pass(ctx))
	st := waitStats(t, b, "orphans", func(st queue.Stats) bool { return st.Unacked == 0 })
	require.Equal(t, queue.Stats{Ready: 2}, st)
	d := amqptest.Get(t, ch, "orphans", true)
	require.Equal(t, "a", string(d.Body), "back in its original position")
	require.True(t, d.Redelivered)

	// A live owner's delivery is left alone.
	held := amqptest.Get(t, ch, "orphans", false)
	require.NoError(t, b.scan.Pass(ctx))
	require.Equal(t, queue.Stats{Unacked: 1}, queueStats(t, b, "orphans"))
	require.NoError(t, held.Ack(false))
}

func TestEngineOrphanedRule(t *testing.T) {
	b := startBroker(t, Options{})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	amqptest.RequireWorks(t, conn)
	live := b.liveConnections()
	require.Len(t, live, 1)
	var liveID string
	for id := range live {
		liveID = id
	}
	this := unacked.Entry{Broker: b.nodeID, Incarnation: b.incarnation, Connection: liveID, State: unacked.Delivered}
	tests := []struct {
		name   string
		change func(e *unacked.Entry)
		want   bool
	}{
		{"live connection of this run", func(*unacked.Entry) {}, false},
		{"another broker", func(e *unacked.Entry) { e.Broker = "warren@elsewhere" }, true},
		{"an earlier run", func(e *unacked.Entry) { e.Incarnation-- }, true},
		{"a closed connection", func(e *unacked.Entry) { e.Connection = "127.0.0.1:1 -> 127.0.0.1:2#999" }, true},
	}
	b.scan.Lock() // orphaned runs during passes only
	defer b.scan.Unlock()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := this
			tc.change(&e)
			require.Equal(t, tc.want, b.scan.Orphaned(e))
		})
	}
}

func TestScanInterval(t *testing.T) {
	tests := []struct {
		set, timeout, want time.Duration
	}{
		{0, 0, unacked.DefaultScanInterval},
		{0, DefaultConsumerTimeout, unacked.DefaultScanInterval},
		{0, 2 * time.Second, time.Second},
		{0, time.Millisecond, 10 * time.Millisecond},
		{100 * time.Millisecond, DefaultConsumerTimeout, 100 * time.Millisecond},
		{time.Minute, 2 * time.Second, time.Second},
		{time.Minute, 0, time.Minute},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, scan.Interval(tc.set, tc.timeout), "set %v, timeout %v", tc.set, tc.timeout)
	}
}
