package scan

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/unacked"
)

func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		name         string
		set, timeout time.Duration
		want         time.Duration
	}{
		{"the default", 0, 0, unacked.DefaultScanInterval},
		{"as set", time.Second, 0, time.Second},
		{"half a short timeout", 0, 2 * time.Second, time.Second},
		{"a long timeout keeps the default", 0, time.Minute, unacked.DefaultScanInterval},
		{"a timeout shorter than the one set", 3 * time.Second, 2 * time.Second, time.Second},
		{"never below 10ms", 0, time.Millisecond, 10 * time.Millisecond},
		{"a timeout off", time.Second, -1, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Interval(tc.set, max(tc.timeout, 0)))
		})
	}
}

// TestOrphaned: a delivery is orphaned when its run of this broker is
// over or its connection is gone, or, another broker's, outside shared
// mode always and in shared mode only on the leader once that broker is
// dead.
func TestOrphaned(t *testing.T) {
	live := new(session.Conn) // only its presence in Conns is read
	entry := func(broker string, incarnation uint64, conn string) unacked.Entry {
		return unacked.Entry{Broker: broker, Incarnation: incarnation, Connection: conn}
	}
	for _, tc := range []struct {
		name      string
		shared    bool
		leader    bool
		peerAlive func(string) bool
		e         unacked.Entry
		want      bool
	}{
		{"this run, live connection", false, true, nil, entry("n1", 2, "c1"), false},
		{"this run, connection gone", false, true, nil, entry("n1", 2, "c9"), true},
		{"an earlier run", false, true, nil, entry("n1", 1, "c1"), true},
		{"another broker, not shared", false, false, nil, entry("n2", 2, "c1"), true},
		{"another broker, shared, not the leader", true, false, func(string) bool { return false }, entry("n2", 2, "c1"), false},
		{"another broker, shared, leader, alive", true, true, func(string) bool { return true }, entry("n2", 2, "c1"), false},
		{"another broker, shared, leader, dead", true, true, func(string) bool { return false }, entry("n2", 2, "c1"), true},
		{"another broker, shared, leader, no judge", true, true, nil, entry("n2", 2, "c1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{
				Shared: tc.shared, Leader: func() bool { return tc.leader }, PeerAlive: tc.peerAlive,
				Node: "n1", Incarnation: 2,
				Conns: func() map[string]*session.Conn { return map[string]*session.Conn{"c1": live} },
			})
			require.NoError(t, err)
			require.Equal(t, tc.want, s.Orphaned(tc.e))
		})
	}
}

// TestPassRequeuesOrphans: a pass over every index hands the orphaned
// deliveries to Requeue and leaves the live ones; a node that does not
// lead (outside shared mode) requeues nothing.
func TestPassRequeuesOrphans(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		leader bool
		want   []uint64 // offsets requeued, by index
	}{
		{"the leader", true, []uint64{2, 12}},
		{"not the leader", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := unacked.NewMemoryIndex(), unacked.NewMemoryIndex()
			put := func(x unacked.Index, off uint64, conn string) {
				require.NoError(t, x.Put(ctx, []unacked.Entry{{
					Key: unacked.Key{VHost: "/", Queue: "q", Offset: off}, Connection: conn,
					Broker: "n1", Incarnation: 1, DeliveredAt: time.Now().UnixNano(), DeliveryCount: 1, State: unacked.Delivered,
				}}))
			}
			put(a, 1, "c1")
			put(a, 2, "gone")
			put(b, 11, "c1")
			put(b, 12, "gone")
			var mu sync.Mutex
			var requeued []uint64
			s, err := New(Config{
				Indexes: []unacked.Index{a, b},
				Leader:  func() bool { return tc.leader },
				Node:    "n1", Incarnation: 1,
				Conns: func() map[string]*session.Conn { return map[string]*session.Conn{"c1": new(session.Conn)} },
				Requeue: func(_ context.Context, es []unacked.Entry) {
					mu.Lock()
					defer mu.Unlock()
					for _, e := range es {
						requeued = append(requeued, e.Offset)
					}
				},
				TimedOut: func(context.Context, unacked.Index, unacked.Entry) { t.Error("nothing times out") },
			})
			require.NoError(t, err)
			require.NoError(t, s.Pass(ctx))
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, tc.want, requeued)
		})
	}
}

// TestTimeoutRetunes: SetTimeout changes the timeout in force, and the
// newest of several not yet taken by the goroutine wins.
func TestTimeoutRetunes(t *testing.T) {
	s, err := New(Config{Timeout: time.Minute, Leader: func() bool { return false }})
	require.NoError(t, err)
	require.Equal(t, time.Minute, s.Timeout())
	s.SetTimeout(4 * time.Second)
	s.SetTimeout(2 * time.Second) // the goroutine is not running: replaces the first
	require.Equal(t, 2*time.Second, s.Timeout())
	require.Equal(t, time.Second, <-s.retune)
	select {
	case d := <-s.retune:
		t.Fatalf("a second retune %v", d)
	default:
	}
}

// TestStartStop: Stop stops the goroutine Start started, and is safe on a
// scanner never started.
func TestStartStop(t *testing.T) {
	s, err := New(Config{Leader: func() bool { return false }, Every: time.Millisecond,
		Conns: func() map[string]*session.Conn { return nil }})
	require.NoError(t, err)
	s.Stop()
	s.Start()
	s.SetTimeout(time.Second) // taken by the running goroutine
	s.Stop()
	select {
	case <-s.done:
	default:
		t.Fatal("Stop returned with the goroutine running")
	}
}
