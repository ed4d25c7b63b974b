package broker

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/federation"
)

// countingHost is the broker as the federation links see it, counting
// their reads of bindings and demand; with quiet its Watch pokes nothing.
type countingHost struct {
	federationHost
	bindings, demand atomic.Int64
	quiet            bool
}

func (h *countingHost) Bindings(vhost, x string) []federation.Binding {
	h.bindings.Add(1)
	return h.federationHost.Bindings(vhost, x)
}

func (h *countingHost) Demand(vhost, q string) bool {
	h.demand.Add(1)
	return h.federationHost.Demand(vhost, q)
}

func (h *countingHost) Watch(vhost, name string, queue bool, wake chan<- struct{}) func() {
	if h.quiet {
		return func() {}
	}
	return h.federationHost.Watch(vhost, name, queue, wake)
}

// federatedPair is an upstream broker and a downstream one whose
// federation supervisor runs its links on h, re-reading every reread.
func federatedPair(t *testing.T, h *countingHost, reread time.Duration) (up, down *Broker) {
	t.Helper()
	ctx := context.Background()
	up, down = startBroker(t, Options{}), startBroker(t, Options{})
	_, err := down.Admin().PutGlobalParameter(ctx, GlobalParameter{Name: "cluster_name", Value: json.RawMessage(`"down"`)})
	require.NoError(t, err)
	h.federationHost = federationHost{down}
	down.federation.Stop()
	down.federation = federation.NewSupervisor(federation.Config{
		Host: h, Params: down.Admin(), Local: down.linkDoors(), Log: down.log, Reread: reread,
	})
	down.federation.Start()
	v, err := json.Marshal(map[string]any{"uri": up.URL(), "reconnect-delay": 0.2})
	require.NoError(t, err)
	_, err = down.Admin().PutParameter(ctx, Parameter{VHost: "/", Component: "federation-upstream", Name: "up", Value: v})
	require.NoError(t, err)
	return up, down
}

// upstreamBound reports whether up's exchange x has a binding with key
// (the link's exchange-to-exchange binding).
func upstreamBound(up *Broker, x, key string) bool {
	vh, _ := up.lookupVHost("/")
	for _, b := range vh.Bindings() {
		if b.Source == x && b.Key == key && b.Destination.Exchange {
			return true
		}
	}
	return false
}

// idle waits for reads to settle (what the last change set going, such
// as a paused consumer draining, may read once more), then checks that
// an idle link reads nothing for a second: the old poll read every
// 250 ms, so it never settled.
func idle(t *testing.T, reads *atomic.Int64) {
	t.Helper()
	for last := int64(-1); ; {
		n := reads.Load()
		if n == last {
			break
		}
		last = n
		time.Sleep(300 * time.Millisecond)
	}
	before := reads.Load()
	time.Sleep(time.Second)
	require.Equal(t, before, reads.Load(), "an idle link reads nothing")
}

// TestFederatedExchangeFollowsBindingEvents: with a re-read of an hour,
// a local bind and unbind reach the upstream at once, each after one or
// two reads of the bindings (the events', never a periodic one), and an
// idle link reads nothing. Without events the same bind does not move
// within a second (the control: the events are what moved it), and the
// re-read alone still catches it.
func TestFederatedExchangeFollowsBindingEvents(t *testing.T) {
	ctx := context.Background()
	bindAndSee := func(t *testing.T, h *countingHost, reread time.Duration) (*Broker, func(string) bool) {
		up, down := federatedPair(t, h, reread)
		require.NoError(t, down.Admin().PutPolicy(ctx, Policy{VHost: "/", Name: "fed", Pattern: `^fed$`, ApplyTo: "exchanges",
			Definition: map[string]any{"federation-upstream": "up"}}))
		ch := amqptest.Channel(t, amqptest.DialVia(t, down.Dial, "guest", "guest"))
		require.NoError(t, ch.ExchangeDeclare("fed", "topic", true, false, false, false, nil))
		amqptest.DeclareQueue(t, ch, "q", false)
		require.NoError(t, ch.QueueBind("q", "a.*", "fed", false, nil))
		amqptest.Poll(t, func() bool { return upstreamBound(up, "fed", "a.*") }, "the first binding upstream")
		return down, func(key string) bool { return upstreamBound(up, "fed", key) }
	}
	t.Run("events", func(t *testing.T) {
		h := &countingHost{}
		down, bound := bindAndSee(t, h, time.Hour)
		ch := amqptest.Channel(t, amqptest.DialVia(t, down.Dial, "guest", "guest"))
		before := h.bindings.Load()
		require.NoError(t, ch.QueueBind("q", "z.*", "fed", false, nil))
		amqptest.Poll(t, func() bool { return bound("z.*") }, "the new binding upstream")
		reads := h.bindings.Load() - before
		require.True(t, reads >= 1 && reads <= 2, "%d reads for one bind", reads)
		before = h.bindings.Load()
		require.NoError(t, ch.QueueUnbind("q", "a.*", "fed", nil))
		amqptest.Poll(t, func() bool { return !bound("a.*") }, "the removed binding gone upstream")
		reads = h.bindings.Load() - before
		require.True(t, reads >= 1 && reads <= 2, "%d reads for one unbind", reads)
		idle(t, &h.bindings)
	})
	t.Run("no events, no re-read", func(t *testing.T) {
		h := &countingHost{quiet: true}
		down, bound := bindAndSee(t, h, time.Hour)
		ch := amqptest.Channel(t, amqptest.DialVia(t, down.Dial, "guest", "guest"))
		require.NoError(t, ch.QueueBind("q", "z.*", "fed", false, nil))
		time.Sleep(time.Second)
		require.False(t, bound("z.*"), "moved without an event or a re-read")
	})
	t.Run("no events, the re-read", func(t *testing.T) {
		h := &countingHost{quiet: true}
		down, bound := bindAndSee(t, h, 100*time.Millisecond)
		ch := amqptest.Channel(t, amqptest.DialVia(t, down.Dial, "guest", "guest"))
		require.NoError(t, ch.QueueBind("q", "z.*", "fed", false, nil))
		amqptest.Poll(t, func() bool { return bound("z.*") }, "the re-read catches the binding")
	})
}

// TestFederatedQueueFollowsDemandNotices: with a re-read of an hour, a
// federated queue's link starts consuming upstream when a local consumer
// comes and pauses when it goes, each after a few reads of the demand
// (the queue's notices), and an idle link reads nothing.
func TestFederatedQueueFollowsDemandNotices(t *testing.T) {
	ctx := context.Background()
	h := &countingHost{}
	up, down := federatedPair(t, h, time.Hour)
	uch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, up.Dial, "guest", "guest"))
	amqptest.DeclareQueue(t, uch, "fq", true)
	amqptest.PublishConfirmed(t, uch, "fq", true, amqptest.Numbered("m", 5)...)
	require.NoError(t, down.Admin().PutPolicy(ctx, Policy{VHost: "/", Name: "fedq", Pattern: `^fq$`, ApplyTo: "queues",
		Definition: map[string]any{"federation-upstream": "up"}}))
	dconn := amqptest.DialVia(t, down.Dial, "guest", "guest")
	amqptest.DeclareQueue(t, amqptest.Channel(t, dconn), "fq", true)
	upConsumers := func() int {
		q, err := uch.QueueDeclarePassive("fq", true, false, false, false, nil)
		require.NoError(t, err)
		return q.Consumers
	}
	amqptest.Poll(t, func() bool { return h.demand.Load() > 0 }, "the link's first look at the demand")
	time.Sleep(300 * time.Millisecond)
	require.Zero(t, upConsumers(), "no local consumer: no consumer upstream")

	before := h.demand.Load()
	cch := amqptest.Channel(t, dconn)
	ds, err := cch.Consume("fq", "c", true, false, false, false, nil)
	require.NoError(t, err)
	for i := range 5 {
		select {
		case m := <-ds:
			require.Equal(t, amqptest.Numbered("m", 5)[i], string(m.Body))
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d did not arrive", i)
		}
	}
	reads := h.demand.Load() - before
	require.True(t, reads >= 1 && reads <= 12, "%d reads of the demand for a consumer and five messages", reads)
	require.NoError(t, cch.Cancel("c", false))
	amqptest.Poll(t, func() bool { return upConsumers() == 0 }, "the link pauses upstream")
	idle(t, &h.demand)
}
