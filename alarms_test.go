package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/alarm"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
)

// fastAlarms samples memory and disk every few milliseconds, so the
// monitor reacts within a test's patience.
var fastAlarms = alarm.Polling{Memory: 5 * time.Millisecond, Disk: 5 * time.Millisecond}

// expectBlocking waits for the next connection.blocked or unblocked.
func expectBlocking(t *testing.T, blocked <-chan amqp091.Blocking, active bool, reason string) {
	t.Helper()
	select {
	case b := <-blocked:
		require.Equal(t, amqp091.Blocking{Active: active, Reason: reason}, b)
	case <-time.After(amqptest.Timeout):
		t.Fatalf("no connection.blocked (active=%v)", active)
	}
}

// dialPublisher connects a client that will be blocked. A blocked client's
// Close waits for a close-ok the held reader does not read, so a cleanup
// registered after it closes the broker first (a failing test then ends
// instead of hanging).
func dialPublisher(t *testing.T, b *Broker) (*amqp091.Connection, <-chan amqp091.Blocking) {
	t.Helper()
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	t.Cleanup(func() { _ = b.Close() })
	return conn, conn.NotifyBlocked(make(chan amqp091.Blocking, 16))
}

func TestAlarmString(t *testing.T) {
	for a, want := range map[Alarm]string{AlarmMemory: "memory", AlarmDisk: "disk", Alarm(8): "Alarm(8)"} {
		require.Equal(t, want, a.String())
	}
}

// reportingShards is an Options.Storage.Shards store that reports a chosen memory
// figure (storage.MemoryReporter); embedding the interface hides the
// wrapped store's own MemoryBytes.
type reportingShards struct {
	storage.ShardStore
	bytes atomic.Int64
}

func (s *reportingShards) MemoryBytes() int64 { return s.bytes.Load() }

// TestAlarmShardsMemoryReporter: a store given as Options.Storage.Shards that
// implements storage.MemoryReporter counts against the memory watermark:
// what it reports raises the memory alarm and clears it again.
func TestAlarmShardsMemoryReporter(t *testing.T) {
	shards := &reportingShards{ShardStore: memory.New()}
	b := newDirectBroker(t, Options{Storage: StorageOptions{Shards: shards}, MemoryHighWatermark: 1 << 20, alarmPolling: fastAlarms})
	require.Empty(t, b.Alarms())
	shards.bytes.Store(2 << 20)
	require.Eventually(t, func() bool { return len(b.Alarms()) == 1 }, amqptest.Timeout, time.Millisecond)
	require.Equal(t, []Alarm{AlarmMemory}, b.Alarms())
	require.GreaterOrEqual(t, b.alarmStatus().MemUsed, int64(2<<20))
	shards.bytes.Store(0)
	require.Eventually(t, func() bool { return len(b.Alarms()) == 0 }, amqptest.Timeout, time.Millisecond)
}

// TestAlarmManual: RaiseAlarm blocks a publishing connection (it is told
// with connection.blocked and RabbitMQ's reason) and its publishes are not
// routed, while a connection that only consumes keeps receiving; ClearAlarm
// unblocks it and every held publish lands, none lost.
func TestAlarmManual(t *testing.T) {
	for _, tc := range []struct {
		kind   Alarm
		reason string
	}{
		{AlarmMemory, "low on memory"},
		{AlarmDisk, "low on disk"},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			b := startBroker(t, Options{MemoryHighWatermark: -1})
			pub, blocked := dialPublisher(t, b)
			pch := amqptest.Channel(t, pub)
			amqptest.DeclareQueue(t, pch, "q", false)
			amqptest.PublishConfirmed(t, pch, "q", false, amqptest.Numbered("before", 10)...)

			b.raiseAlarm(tc.kind)
			b.raiseAlarm(tc.kind) // idempotent
			require.Equal(t, []Alarm{tc.kind}, b.Alarms())
			amqptest.PublishBodies(t, pch, "q", false, amqptest.Numbered("held", 5)...)
			expectBlocking(t, blocked, true, tc.reason)
			require.Equal(t, uint64(10), queueStats(t, b, "q").Ready, "held publishes are not routed")

			// A consumer-only connection is never blocked.
			cons := amqptest.Dial(t, b.URL(), amqp091.Config{})
			cch := amqptest.Channel(t, cons)
			msgs, err := cch.Consume("q", "", true, false, false, false, nil)
			require.NoError(t, err)
			got := map[string]int{}
			for range 10 {
				got[string(amqptest.Next(t, msgs).Body)]++
			}
			require.Equal(t, uint64(10), b.Stats(context.Background()).Totals.Published, "nothing more was routed meanwhile")
			require.ElementsMatch(t, []string{"blocked", "blocking"}, connectionStates(b),
				"the held publisher is blocked, the consumer only blocking")

			b.clearAlarm(tc.kind)
			expectBlocking(t, blocked, false, "")
			require.Empty(t, b.Alarms())
			for range 5 {
				got[string(amqptest.Next(t, msgs).Body)]++
			}
			for _, body := range append(amqptest.Numbered("before", 10), amqptest.Numbered("held", 5)...) {
				require.Equal(t, 1, got[body], body)
			}
			amqptest.RequireWorks(t, pub) // the publisher goes on as before
			require.Equal(t, []string{"running", "running"}, connectionStates(b))
		})
	}
}

func connectionStates(b *Broker) []string {
	var states []string
	for _, c := range b.Connections() {
		states = append(states, c.State)
	}
	return states
}

// TestAlarmManualAndMonitoredAreORed: a manual alarm and the monitor's are
// separate; the connection stays blocked until both cleared, and is told
// once each way.
func TestAlarmManualAndMonitoredAreORed(t *testing.T) {
	var free, calls atomic.Int64
	free.Store(1 << 40)
	statfs := func(string) (int64, error) {
		calls.Add(1)
		return free.Load(), nil
	}
	b := startBroker(t, Options{DataDir: t.TempDir(), DiskFreeLimit: 1000, MemoryHighWatermark: -1,
		alarmPolling: alarm.Polling{Disk: 5 * time.Millisecond, Statfs: statfs}})
	pub, blocked := dialPublisher(t, b)
	ch := amqptest.Channel(t, pub)
	amqptest.DeclareQueue(t, ch, "q", false)

	b.raiseAlarm(AlarmDisk)
	free.Store(10)
	seen := calls.Load() // two samples later the monitor has seen it
	require.Eventually(t, func() bool { return calls.Load() >= seen+2 }, amqptest.Timeout, time.Millisecond)
	amqptest.PublishBodies(t, ch, "q", false, "x")
	expectBlocking(t, blocked, true, "low on disk")
	b.clearAlarm(AlarmDisk)
	require.Equal(t, []Alarm{AlarmDisk}, b.Alarms(), "the monitored alarm holds")
	b.raiseAlarm(AlarmMemory)
	require.Equal(t, []Alarm{AlarmMemory, AlarmDisk}, b.Alarms())
	b.clearAlarm(AlarmMemory)
	free.Store(1 << 40)
	expectBlocking(t, blocked, false, "")
	waitStats(t, b, "q", func(st queue.Stats) bool { return st.Ready == 1 })
}

// TestMemoryWatermark: with a small watermark, a publisher of 1 KiB
// messages in confirm mode is blocked once the queue holds more than it;
// a consumer on another connection drains the queue, the publisher is
// unblocked, and every message published is consumed exactly once.
func TestMemoryWatermark(t *testing.T) {
	const watermark = 256 << 10
	b := startBroker(t, Options{MemoryHighWatermark: watermark, alarmPolling: fastAlarms})
	pub, blocked := dialPublisher(t, b)
	ch := amqptest.Channel(t, pub)
	amqptest.DeclareQueue(t, ch, "q", false)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1<<16))

	body := make([]byte, 1024)
	published := 0
	publish := func() {
		msg := amqp091.Publishing{Body: body, MessageId: strconv.Itoa(published)}
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, msg))
		published++
	}
	for waiting := true; waiting; {
		publish()
		require.Less(t, published, 1<<15, "never blocked")
		select {
		case bl := <-blocked:
			require.Equal(t, amqp091.Blocking{Active: true, Reason: "low on memory"}, bl)
			waiting = false
		default:
		}
	}
	require.Equal(t, []Alarm{AlarmMemory}, b.Alarms())
	require.Greater(t, b.alarmStatus().MemUsed, int64(watermark))
	publish() // one more while blocked: it waits in the socket

	cons := amqptest.Dial(t, b.URL(), amqp091.Config{})
	cch := amqptest.Channel(t, cons)
	require.NoError(t, cch.Qos(100, 0, false))
	msgs, err := cch.Consume("q", "", false, false, false, false, nil)
	require.NoError(t, err)
	seen := make(map[string]bool, published)
	consumed := func(d amqp091.Delivery) {
		require.False(t, seen[d.MessageId], "message %s delivered twice", d.MessageId)
		seen[d.MessageId] = true
		require.NoError(t, d.Ack(false))
	}
	for unblocked := false; !unblocked; {
		select {
		case bl := <-blocked:
			require.Equal(t, amqp091.Blocking{Active: false}, bl)
			unblocked = true
		case d := <-msgs:
			consumed(d)
		case <-time.After(amqptest.Timeout):
			t.Fatal("never unblocked")
		}
	}
	// The publishes the client had written before it heard of the block
	// land now and may raise the alarm again, as in RabbitMQ: keep
	// consuming until every publish is confirmed and delivered.
	confirmed := 0
	drain := func() {
		for confirmed < published || len(seen) < published {
			select {
			case c := <-confirms:
				require.True(t, c.Ack)
				confirmed++
			case d := <-msgs:
				consumed(d)
			case <-blocked:
			case <-time.After(amqptest.Timeout):
				t.Fatalf("stuck: %d of %d confirmed, %d consumed", confirmed, published, len(seen))
			}
		}
	}
	drain()
	publish() // the publisher goes on
	drain()
	for i := range published {
		require.True(t, seen[strconv.Itoa(i)], "message %d lost", i)
	}
	waitStats(t, b, "q", func(st queue.Stats) bool { return st.Ready == 0 && st.Unacked == 0 })
	require.Eventually(t, func() bool { return len(b.Alarms()) == 0 }, amqptest.Timeout, time.Millisecond,
		"the alarm clears once the queue is empty")
}

// TestMemoryWatermarkBoundsHeap: a publisher pushing as fast as it can
// into a queue whose consumer takes one message a second (a slow
// consumer) is blocked at the watermark, so the process heap (broker and
// both clients) stays within the watermark and a fixed slack, however long
// it pushes.
func TestMemoryWatermarkBoundsHeap(t *testing.T) {
	const (
		watermark = 4 << 20
		slack     = 32 << 20
		pushFor   = 3 * time.Second
	)
	b, err := New(Options{MemoryHighWatermark: watermark, alarmPolling: fastAlarms})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)

	pub, blocked := dialPublisher(t, b)
	pch := amqptest.Channel(t, pub)
	amqptest.DeclareQueue(t, pch, "q", false)

	// The publisher stops at stop, or when Close below ends its connection
	// (its last Publish may be stuck in a socket nobody reads until then).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		body := make([]byte, 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := pch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: body}); err != nil {
				return // the connection was closed
			}
		}
	}()

	cons := amqptest.Dial(t, b.URL(), amqp091.Config{})
	cch := amqptest.Channel(t, cons)
	require.NoError(t, cch.Qos(1, 0, false))
	msgs, err := cch.Consume("q", "", false, false, false, false, nil)
	require.NoError(t, err)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.After(pushFor)
	consumed, wasBlocked := 0, false
	for running := true; running; {
		select {
		case <-tick.C:
			select {
			case d := <-msgs:
				require.NoError(t, d.Ack(false))
				consumed++
			default:
			}
		case bl := <-blocked:
			wasBlocked = wasBlocked || bl.Active
		case <-end:
			running = false
		}
	}
	require.True(t, wasBlocked, "the publisher was never blocked")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := b.alarmStatus()
	t.Logf("consumed %d, message bytes held %d, heap in use %d MiB", consumed, st.MemUsed, ms.HeapInuse>>20)
	require.Less(t, ms.HeapInuse, uint64(watermark+slack), "heap in use")

	close(stop)
	require.NoError(t, b.Close()) // ends the blocked publisher's connection
	wg.Wait()
}

// TestDiskAlarm: the disk monitor raises the alarm when the (faked) free
// space of DataDir's file system drops below DiskFreeLimit plus Pebble's
// headroom and clears it when it is back at that or above; a statfs error
// changes nothing.
func TestDiskAlarm(t *testing.T) {
	var free atomic.Int64
	var fail atomic.Bool
	var calls atomic.Int64
	statfs := func(string) (int64, error) {
		calls.Add(1)
		if fail.Load() {
			return 0, errors.New("statfs: injected failure")
		}
		return free.Load(), nil
	}
	free.Store(1 << 30)
	b := startBroker(t, Options{DataDir: t.TempDir(), DiskFreeLimit: 1000, MemoryHighWatermark: -1,
		alarmPolling: alarm.Polling{Disk: 5 * time.Millisecond, Statfs: statfs}})
	pub, blocked := dialPublisher(t, b)
	ch := amqptest.Channel(t, pub)
	amqptest.DeclareQueue(t, ch, "q", false)

	waitAlarms := func(want ...Alarm) {
		t.Helper()
		if want == nil {
			want = []Alarm{}
		}
		require.Eventually(t, func() bool { return fmt.Sprint(b.Alarms()) == fmt.Sprint(want) }, amqptest.Timeout, time.Millisecond)
	}
	// The alarm keeps Pebble's headroom free besides the limit.
	h := b.alarm.DiskHeadroom()
	require.Positive(t, h)
	for i, step := range []struct {
		free int64
		fail bool
		want []Alarm
	}{
		{free: 2000},
		{free: 999, want: []Alarm{AlarmDisk}},
		{fail: true, want: []Alarm{AlarmDisk}}, // unchanged
		{free: 1000},                           // at the limit is enough
		{fail: true},
		{free: 0, want: []Alarm{AlarmDisk}},
		{free: 5000},
	} {
		free.Store(step.free + h)
		fail.Store(step.fail)
		// Two samples taken after the change, so the monitor has seen it.
		seen := calls.Load()
		require.Eventually(t, func() bool { return calls.Load() >= seen+2 }, amqptest.Timeout, time.Millisecond)
		waitAlarms(step.want...)
		st := b.alarmStatus()
		require.Equal(t, int64(1000), st.DiskFreeLimit, "step %d", i)
		require.Equal(t, step.want != nil, st.DiskFreeAlarm, "step %d", i)
	}

	// And the connections obey it.
	free.Store(h + 1)
	waitAlarms(AlarmDisk)
	amqptest.PublishBodies(t, ch, "q", false, "x")
	expectBlocking(t, blocked, true, "low on disk")
	free.Store(1 << 30)
	expectBlocking(t, blocked, false, "")
	waitStats(t, b, "q", func(st queue.Stats) bool { return st.Ready == 1 })
}

// TestAlarmLimits: what each Options setting resolves to.
func TestAlarmLimits(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name                string
		opts                Options
		wantMem, wantDisk   int64
		memDefault, monitor bool
	}{
		{name: "defaults without DataDir", opts: Options{}, memDefault: true, monitor: true},
		{name: "defaults with DataDir", opts: Options{DataDir: dir}, memDefault: true, wantDisk: DefaultDiskFreeLimit, monitor: true},
		{name: "explicit", opts: Options{DataDir: dir, MemoryHighWatermark: 1 << 20, DiskFreeLimit: 1 << 30}, wantMem: 1 << 20, wantDisk: 1 << 30, monitor: true},
		{name: "disk limit without DataDir is moot", opts: Options{MemoryHighWatermark: -1, DiskFreeLimit: 1 << 30}},
		// The monitor still watches the disk to clear a disk-full alarm
		// (a write refused with ENOSPC) and restore the disk reserve.
		{name: "both off", opts: Options{DataDir: dir, MemoryHighWatermark: -1, DiskFreeLimit: -1}, monitor: true},
		{name: "both off without DataDir", opts: Options{MemoryHighWatermark: -1, DiskFreeLimit: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(tc.opts)
			require.NoError(t, err)
			defer b.Close()
			st := b.alarmStatus()
			if tc.memDefault {
				require.Equal(t, int64(DefaultMemoryHighWatermarkRatio*float64(alarm.TotalMemory())), st.MemLimit)
				require.Positive(t, st.MemLimit)
			} else {
				require.Equal(t, tc.wantMem, st.MemLimit)
			}
			require.Equal(t, tc.wantDisk, st.DiskFreeLimit)
			require.Equal(t, tc.monitor, b.alarm.Running(), "monitor goroutine running")
			require.Empty(t, b.Alarms())
		})
	}
}

// TestAlarmCloseWhileBlocked: Close returns while a TCP publisher is held
// and a direct publish waits; both end with an error and nothing leaks
// (amqptest.CheckGoroutines here, goleak after the package).
func TestAlarmCloseWhileBlocked(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b, err := New(Options{MemoryHighWatermark: -1})
	require.NoError(t, err)
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)

	pub, blocked := dialPublisher(t, b)
	closed := pub.NotifyClose(make(chan *amqp091.Error, 1))
	ch := amqptest.Channel(t, pub)
	amqptest.DeclareQueue(t, ch, "q", false)
	direct, err := b.Channel(context.Background())
	require.NoError(t, err)

	b.raiseAlarm(AlarmMemory)
	amqptest.PublishBodies(t, ch, "q", false, "held")
	expectBlocking(t, blocked, true, "low on memory")
	directDone := make(chan error, 1)
	go func() {
		directDone <- direct.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("waits")})
	}()
	require.Eventually(t, func() bool { return direct.c.Conn().Blocked() }, amqptest.Timeout, time.Millisecond)

	require.NoError(t, b.Close())
	require.Error(t, <-directDone)
	e := amqptest.AwaitClose(t, closed)
	require.Equal(t, amqp091.ConnectionForced, e.Code)
}

// TestAlarmDirectChannel: a direct Channel's publish waits while an alarm
// is raised: its context ends the wait without publishing, a clear lets it
// through, and the Channel's Close is not held up by a waiting publish.
func TestAlarmDirectChannel(t *testing.T) {
	b := startBroker(t, Options{MemoryHighWatermark: -1})
	ch, err := b.Channel(context.Background())
	require.NoError(t, err)
	_, err = ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	msg := amqp091.Publishing{Body: []byte("x")}

	b.raiseAlarm(AlarmMemory)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, ch.PublishWithContext(ctx, "", "q", false, false, msg), context.DeadlineExceeded)

	done := make(chan error, 1)
	go func() { done <- ch.Publish("", "q", false, false, msg) }()
	require.Eventually(t, ch.c.Conn().Blocked, amqptest.Timeout, time.Millisecond)
	require.Zero(t, queueStats(t, b, "q").Ready, "nothing published while blocked")
	b.clearAlarm(AlarmMemory)
	require.NoError(t, <-done)
	waitStats(t, b, "q", func(st queue.Stats) bool { return st.Ready == 1 })

	b.raiseAlarm(AlarmDisk)
	go func() { done <- ch.Publish("", "q", false, false, msg) }()
	require.Eventually(t, ch.c.Conn().Blocked, amqptest.Timeout, time.Millisecond)
	require.NoError(t, ch.Close())
	require.Error(t, <-done)
	b.clearAlarm(AlarmDisk)
	require.Equal(t, uint64(1), queueStats(t, b, "q").Ready)
}

// TestAlarmOperatorSurfaces: /api/nodes carries RabbitMQ's alarm fields and
// the metrics their 0/1 gauges, following RaiseAlarm and ClearAlarm.
func TestAlarmOperatorSurfaces(t *testing.T) {
	b := startBroker(t, Options{DataDir: t.TempDir(), MemoryHighWatermark: 1 << 20, DiskFreeLimit: 1000,
		alarmPolling: alarm.Polling{Statfs: func(string) (int64, error) { return 1 << 30, nil }}})
	get := func(h http.Handler, path string) string { return getOK(t, h, path) }
	// The monitor's first disk sample.
	require.Eventually(t, func() bool { return b.alarmStatus().DiskFree == 1<<30 }, amqptest.Timeout, time.Millisecond)
	for _, raised := range []bool{false, true, false} {
		if raised {
			b.raiseAlarm(AlarmMemory)
			b.raiseAlarm(AlarmDisk)
		} else {
			b.clearAlarm(AlarmMemory | AlarmDisk)
		}
		var nodes []map[string]any
		require.NoError(t, json.Unmarshal([]byte(get(b.ManagementHandler(), "/api/nodes")), &nodes))
		require.Len(t, nodes, 1)
		n := nodes[0]
		require.Equal(t, raised, n["mem_alarm"])
		require.Equal(t, raised, n["disk_free_alarm"])
		require.Equal(t, float64(1<<20), n["mem_limit"])
		require.Equal(t, float64(1000), n["disk_free_limit"])
		require.Contains(t, n, "mem_used")
		require.Equal(t, float64(1<<30), n["disk_free"])

		metrics := get(b.MetricsHandler(MetricsOptions{}), "/metrics")
		want := map[bool]string{false: "0", true: "1"}[raised]
		require.Contains(t, metrics, "\nrabbitmq_alarms_memory_used_watermark "+want+"\n")
		require.Contains(t, metrics, "\nrabbitmq_alarms_free_disk_space_watermark "+want+"\n")
	}
}
