package events

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
)

// got is what the tests' subscriptions carry.
type got struct {
	Event
	at      time.Time
	dropped uint64
}

func record(e Event, at time.Time, dropped uint64) got {
	return got{Event: e, at: at, dropped: dropped}
}

// drain reads what is buffered in ch without waiting.
func drain(ch <-chan got) []got {
	var out []got
	for {
		select {
		case g, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, g)
		default:
			return out
		}
	}
}

// requireClosed fails unless ch is closed (after what it buffers).
func requireClosed(t *testing.T, ch <-chan got) {
	t.Helper()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("subscription channel not closed")
		}
	}
}

func TestHubFanOut(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name  string
		mask  Mask
		emit  []Kind
		wants []Kind
	}{
		{"all kinds", All, []Kind{ConnectionCreated, MessageExpired, ConsumerDeleted}, []Kind{ConnectionCreated, MessageExpired, ConsumerDeleted}},
		{"one kind", MaskOf(MessageReturned), []Kind{ConnectionCreated, MessageReturned, MessageExpired, MessageReturned}, []Kind{MessageReturned, MessageReturned}},
		{"two kinds", MaskOf(ConnectionCreated, ConnectionClosed), []Kind{ConnectionCreated, ConsumerCreated, ConnectionClosed}, []Kind{ConnectionCreated, ConnectionClosed}},
		{"no kind listed means all", MaskOf(), []Kind{ConsumerCreated}, []Kind{ConsumerCreated}},
		{"empty mask", 0, []Kind{ConnectionCreated}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub(clock.NewFake(start))
			ch := Subscribe(context.Background(), h, 16, tc.mask, record)
			other := Subscribe(context.Background(), h, 16, All, record)
			for i, k := range tc.emit {
				h.Emit(Event{Kind: k, Queue: string(rune('a' + i))})
			}
			var kinds []Kind
			for _, g := range drain(ch) {
				kinds = append(kinds, g.Kind)
				require.Equal(t, start, g.at, "stamped with the hub's clock")
				require.Zero(t, g.dropped)
			}
			require.Equal(t, tc.wants, kinds)
			require.Len(t, drain(other), len(tc.emit), "every subscriber gets its kinds")
			h.Close()
			requireClosed(t, ch)
			requireClosed(t, other)
		})
	}
}

// A subscriber that does not read loses events, never blocks the
// emitter, and learns how many it lost from the next event it gets.
func TestHubDropCounting(t *testing.T) {
	tests := []struct {
		name   string
		buffer int
		emit   int
	}{
		{"buffer 1", 1, 100},
		{"buffer 4", 4, 37},
		{"no overflow", 8, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub(nil)
			ch := Subscribe(context.Background(), h, tc.buffer, All, record)
			for range tc.emit {
				h.Emit(Event{Kind: MessageExpired}) // returns although nobody reads
			}
			buffered := drain(ch)
			require.Len(t, buffered, tc.buffer)
			for _, g := range buffered {
				require.Zero(t, g.dropped, "nothing was dropped before the buffered events")
			}
			h.Emit(Event{Kind: MessageReturned})
			next := drain(ch)
			require.Len(t, next, 1)
			require.Equal(t, MessageReturned, next[0].Kind)
			require.Equal(t, uint64(tc.emit-tc.buffer), next[0].dropped)
			h.Emit(Event{Kind: MessageReturned})
			require.Zero(t, drain(ch)[0].dropped, "the count starts again after it was reported")
			h.Close()
		})
	}
}

func TestHubUnsubscribe(t *testing.T) {
	tests := []struct {
		name string
		end  func(cancel context.CancelFunc, h *Hub)
	}{
		{"context cancelled", func(cancel context.CancelFunc, _ *Hub) { cancel() }},
		{"hub closed", func(_ context.CancelFunc, h *Hub) { h.Close() }},
		{"hub closed, then context cancelled", func(cancel context.CancelFunc, h *Hub) { h.Close(); cancel() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub(nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch := Subscribe(ctx, h, 4, All, record)
			require.True(t, h.On(ConnectionCreated))
			tc.end(cancel, h)
			requireClosed(t, ch)
			require.Eventually(t, func() bool { return !h.On(ConnectionCreated) }, 5*time.Second, time.Millisecond)
			require.Nil(t, h.subs.Load(), "the subscription is gone from the hub")
			h.Emit(Event{Kind: ConnectionCreated}) // must not send on the closed channel
		})
	}
}

func TestSubscribeEndedAtOnce(t *testing.T) {
	tests := []struct {
		name string
		ctx  func() context.Context
		hub  func() *Hub
	}{
		{"cancelled context", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, func() *Hub { return NewHub(nil) }},
		{"closed hub", context.Background, func() *Hub {
			h := NewHub(nil)
			h.Close()
			return h
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.hub()
			ch := Subscribe(tc.ctx(), h, 1, All, record)
			requireClosed(t, ch)
			require.False(t, h.On(ConnectionCreated))
		})
	}
}

func TestNilHub(t *testing.T) {
	var h *Hub
	require.False(t, h.On(ConnectionCreated))
	h.Emit(Event{Kind: ConnectionCreated})
}

// Emitters on many goroutines while subscribers come and go: run with
// -race; every event is either received or counted as dropped.
func TestHubConcurrent(t *testing.T) {
	h := NewHub(nil)
	const emitters, each = 4, 500
	ctx, cancel := context.WithCancel(context.Background())
	counted := Subscribe(context.Background(), h, 8, All, record)
	var received, dropped uint64
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for g := range counted {
			received++
			dropped += g.dropped
		}
	}()
	churn := make(chan struct{})
	go func() {
		defer close(churn)
		for ctx.Err() == nil {
			c, stop := context.WithCancel(ctx)
			ch := Subscribe(c, h, 1, MaskOf(MessageExpired), record)
			stop()
			for range ch {
			}
		}
	}()
	var wg sync.WaitGroup
	for range emitters {
		wg.Go(func() {
			for range each {
				h.Emit(Event{Kind: MessageExpired})
			}
		})
	}
	wg.Wait()
	cancel()
	<-churn
	// The last drops are reported by the next event: send one the
	// reader surely has room for.
	require.Eventually(t, func() bool { return len(counted) == 0 }, 5*time.Second, time.Millisecond)
	h.Emit(Event{Kind: ConnectionClosed})
	h.Close()
	<-readDone
	require.Equal(t, uint64(emitters*each+1), received+dropped)
}

func TestMessageID(t *testing.T) {
	tests := []struct {
		name  string
		props []byte
		want  string
	}{
		{"none", nil, ""},
		{"no message-id", (&amqp.Properties{ContentType: "text/plain"}).Append(nil), ""},
		{"message-id", (&amqp.Properties{MessageID: "m-1"}).Append(nil), "m-1"},
		{"malformed", []byte{0xff}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, MessageID(tc.props))
		})
	}
}

// BenchmarkEmit measures a source's cost: "off" is the guard alone (no
// subscriber), the others a full emit to one subscriber that keeps up
// (reading) or one whose buffer is full (the event is counted and
// dropped).
func BenchmarkEmit(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		h := NewHub(nil)
		b.ReportAllocs()
		for b.Loop() {
			if h.On(MessageExpired) {
				h.Emit(Event{Kind: MessageExpired})
			}
		}
	})
	b.Run("reading", func(b *testing.B) {
		h := NewHub(nil)
		ch := Subscribe(context.Background(), h, 256, All, record)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range ch {
			}
		}()
		b.ReportAllocs()
		for b.Loop() {
			if h.On(MessageExpired) {
				h.Emit(Event{Kind: MessageExpired})
			}
		}
		h.Close()
		<-done
	})
	b.Run("full", func(b *testing.B) {
		h := NewHub(nil)
		_ = Subscribe(context.Background(), h, 1, All, record)
		h.Emit(Event{Kind: MessageExpired})
		b.ReportAllocs()
		for b.Loop() {
			if h.On(MessageExpired) {
				h.Emit(Event{Kind: MessageExpired})
			}
		}
		h.Close()
	})
}
