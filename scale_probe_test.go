package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/measure"
)

// TestScaleQueuesProbe measures what queues cost as their number grows:
// declare+bind, publish one persistent message to each, purge, delete,
// with the live heap and the process's RSS after each phase, on Pebble
// over TCP with amqp091-go. It is a measuring tool, not a check: it runs
// only when WARREN_SCALE_QUEUES names the counts (e.g. "1000,5000"), and
// WARREN_SCALE_PROFILE, when set, is a file prefix for heap profiles
// and a CPU profile of the purges. With WARREN_SCALE_DRAIN set, a
// consumer takes each queue's message instead of the purge, and the
// queues are measured again once idle (after 2 s) and after
// debug.FreeOSMemory.
func TestScaleQueuesProbe(t *testing.T) {
	spec := os.Getenv("WARREN_SCALE_QUEUES")
	if spec == "" {
		t.Skip("WARREN_SCALE_QUEUES not set")
	}
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(f)
		require.NoError(t, err)
		t.Run(f, func(t *testing.T) { probeQueues(t, n) })
	}
}

func probeQueues(t *testing.T, n int) {
	b := brokertest.NewUnstarted(t, broker.Options{DataDir: t.TempDir()})
	brokertest.Start(t, b)
	conn, err := amqp091.Dial(b.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n+1))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%d", i)
	}
	profile := os.Getenv("WARREN_SCALE_PROFILE")
	base := measure.LiveHeap()
	baseRSS, _ := procStatus("VmRSS")
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	baseStack := int64(ms0.StackInuse)
	// A sampler keeps the peaks of stack and heap-object memory between
	// reports: the transient cost of a phase.
	var peakStack, peakObjects atomic.Uint64
	stopSampler, samplerDone := make(chan struct{}), make(chan struct{})
	defer func() { close(stopSampler); <-samplerDone }()
	go func() {
		defer close(samplerDone)
		ss := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-stopSampler:
				return
			case <-time.After(time.Millisecond):
			}
			metrics.Read(ss)
			if v := ss[0].Value.Uint64(); v > peakStack.Load() {
				peakStack.Store(v)
			}
			if v := ss[1].Value.Uint64(); v > peakObjects.Load() {
				peakObjects.Store(v)
			}
		}
	}()
	report := func(phase string, start time.Time, ops int) {
		el := time.Since(start)
		t.Logf("n=%d %-8s peak stacks %d MiB, peak heap objects %d MiB", n, phase, peakStack.Swap(0)>>20, peakObjects.Swap(0)>>20)
		heap := measure.LiveHeap()
		rss, _ := procStatus("VmRSS")
		hwm, _ := procStatus("VmHWM")
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("n=%d %-8s heapidle-released %d MiB stacksys %d MiB othersys %d MiB gcsys %d MiB mspan %d MiB", n, phase, (ms.HeapIdle-ms.HeapReleased)>>20, ms.StackSys>>20, ms.OtherSys>>20, ms.GCSys>>20, ms.MSpanSys>>20)
		t.Logf("n=%d %-8s %8.0f/s  heap/queue %6d B  stack/queue %6d B  rss/queue %6d B  rss %4d MiB  peak %4d MiB  goroutines %d  heapinuse %d MiB  gosys-released %d MiB",
			n, phase, float64(ops)/el.Seconds(), (heap-base)/int64(n), (int64(ms.StackInuse)-baseStack)/int64(n), (rss-baseRSS)/int64(n), rss>>20, hwm>>20, runtime.NumGoroutine(), ms.HeapInuse>>20, (ms.Sys-ms.HeapReleased)>>20)
		if profile != "" {
			f, err := os.Create(fmt.Sprintf("%s-%d-%s.pprof", profile, n, phase))
			require.NoError(t, err)
			require.NoError(t, pprof.WriteHeapProfile(f))
			require.NoError(t, f.Close())
		}
	}
	start := time.Now()
	for _, name := range names {
		_, err := ch.QueueDeclare(name, true, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.QueueBind(name, name, "amq.direct", false, nil))
	}
	report("declare", start, n)

	start = time.Now()
	ctx := context.Background()
	for _, name := range names {
		require.NoError(t, ch.PublishWithContext(ctx, "amq.direct", name, true, false,
			amqp091.Publishing{Body: []byte("x"), DeliveryMode: amqp091.Persistent}))
	}
	for range n {
		c := <-confirms
		require.True(t, c.Ack)
	}
	report("publish", start, n)

	if os.Getenv("WARREN_SCALE_DRAIN") != "" {
		// Consume each queue's message (a consumer, not a get: the
		// actor's goroutine delivers it), then let the queues go idle.
		start = time.Now()
		for i, name := range names {
			tag := "c" + strconv.Itoa(i)
			msgs, err := ch.Consume(name, tag, true, false, false, false, nil)
			require.NoError(t, err)
			<-msgs
			require.NoError(t, ch.Cancel(tag, false))
		}
		report("drain", start, n)
		time.Sleep(2 * time.Second) // idle queues' actors exit
		report("idle", time.Now().Add(-time.Second), 0)
		debug.FreeOSMemory()
		report("freed", time.Now().Add(-time.Second), 0)
	} else {
		if profile != "" {
			f, err := os.Create(fmt.Sprintf("%s-%d-purge.cpu", profile, n))
			require.NoError(t, err)
			require.NoError(t, pprof.StartCPUProfile(f))
			defer f.Close()
		}
		start = time.Now()
		for _, name := range names {
			got, err := ch.QueuePurge(name, false)
			require.NoError(t, err)
			require.Equal(t, 1, got)
		}
		if profile != "" {
			pprof.StopCPUProfile()
		}
		report("purge", start, n)
	}

	start = time.Now()
	for _, name := range names {
		_, err := ch.QueueDelete(name, false, false, false)
		require.NoError(t, err)
	}
	report("delete", start, n)
}

// procStatus returns a /proc/self/status field given in kB, in bytes.
func procStatus(field string) (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		return kb << 10, err
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// TestScaleImportProbe imports WARREN_SCALE_IMPORT durable queues, each
// bound to amq.direct, through a definitions file on Pebble, and reports
// the rate, heap and RSS per queue; then it deletes them over AMQP (when
// WARREN_SCALE_DELETE is set) and reports that rate. A measuring tool, not
// a check.
func TestScaleImportProbe(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("WARREN_SCALE_IMPORT"))
	if n == 0 {
		t.Skip("WARREN_SCALE_IMPORT not set")
	}
	b := brokertest.NewUnstarted(t, broker.Options{DataDir: t.TempDir()})
	brokertest.Start(t, b)
	d := &definitions.File{}
	for i := range n {
		name := fmt.Sprintf("imp-%d", i)
		d.Queues = append(d.Queues, definitions.Queue{Name: name, VHost: "/", Durable: true})
		d.Bindings = append(d.Bindings, definitions.Binding{Source: "amq.direct", VHost: "/", Destination: name, DestinationType: "queue", RoutingKey: name})
	}
	base := measure.LiveHeap()
	baseRSS, _ := procStatus("VmRSS")
	start := time.Now()
	require.NoError(t, b.Admin().Import(context.Background(), d))
	el := time.Since(start)
	d = nil
	heap := measure.LiveHeap()
	debug.FreeOSMemory()
	rss, _ := procStatus("VmRSS")
	hwm, _ := procStatus("VmHWM")
	t.Logf("import n=%d: %.0f queues+bindings/s (%v), heap/queue %d B, rss/queue %d B (after FreeOSMemory), rss %d MiB, peak %d MiB, goroutines %d",
		n, float64(n)/el.Seconds(), el.Round(time.Millisecond), (heap-base)/int64(n), (rss-baseRSS)/int64(n), rss>>20, hwm>>20, runtime.NumGoroutine())
	if os.Getenv("WARREN_SCALE_DELETE") == "" {
		return
	}
	conn, err := amqp091.Dial(b.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	start = time.Now()
	for i := range n {
		_, err := ch.QueueDelete(fmt.Sprintf("imp-%d", i), false, false, false)
		require.NoError(t, err)
	}
	t.Logf("delete n=%d: %.0f/s", n, float64(n)/time.Since(start).Seconds())
}

// TestScaleConsumersProbe publishes WARREN_SCALE_MESSAGES transient
// messages round-robin across 1,000 queues with 10 consumers each (10,000
// consumers on 10 connections, auto-ack), and reports the rate at which
// they are consumed. A measuring tool, not a check.
func TestScaleConsumersProbe(t *testing.T) {
	total, _ := strconv.Atoi(os.Getenv("WARREN_SCALE_MESSAGES"))
	if total == 0 {
		t.Skip("WARREN_SCALE_MESSAGES not set")
	}
	const queues, perQueue, conns = 1000, 10, 10
	b := brokertest.NewUnstarted(t, broker.Options{DataDir: t.TempDir()})
	brokertest.Start(t, b)
	var got atomic.Int64
	done := make(chan struct{})
	for c := range conns {
		conn, err := amqp091.Dial(b.URL())
		require.NoError(t, err)
		defer conn.Close()
		ch, err := conn.Channel()
		require.NoError(t, err)
		for q := c; q < queues; q += conns {
			name := fmt.Sprintf("cq-%d", q)
			_, err := ch.QueueDeclare(name, false, false, false, false, nil)
			require.NoError(t, err)
		}
		// Each consumer channel carries the consumers of its connection's
		// queues, perQueue each.
		for q := c; q < queues; q += conns {
			for range perQueue {
				msgs, err := ch.Consume(fmt.Sprintf("cq-%d", q), "", true, false, false, false, nil)
				require.NoError(t, err)
				go func() {
					for range msgs {
						if got.Add(1) == int64(total) {
							close(done)
						}
					}
				}()
			}
		}
	}
	base := measure.LiveHeap()
	pconn, err := amqp091.Dial(b.URL())
	require.NoError(t, err)
	defer pconn.Close()
	pch, err := pconn.Channel()
	require.NoError(t, err)
	body := make([]byte, 12)
	start := time.Now()
	ctx := context.Background()
	for i := range total {
		require.NoError(t, pch.PublishWithContext(ctx, "", fmt.Sprintf("cq-%d", i%queues), false, false, amqp091.Publishing{Body: body}))
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("consumed %d of %d", got.Load(), total)
	}
	el := time.Since(start)
	heap := measure.LiveHeap()
	rss, _ := procStatus("VmRSS")
	t.Logf("%d queues, %d consumers: %d messages in %v, %.0f msg/s; heap %d MiB (+%d MiB during the run), rss %d MiB, goroutines %d",
		queues, queues*perQueue, total, el.Round(time.Millisecond), float64(total)/el.Seconds(), heap>>20, (heap-base)>>20, rss>>20, runtime.NumGoroutine())
}

// TestScaleChurnProbe measures what queues declared and deleted in bursts
// leave behind: WARREN_SCALE_CHURN="total,burst" declare/delete cycles
// over TCP, declaring burst queues and then deleting them all, with the
// rate sampler on (1 s), and reports RSS, heap in use (before and after a
// collection) and the live heap every 50,000 cycles and at the end, each
// time once the sampler has had a round to forget the deleted queues.
// WARREN_SCALE_CHURN_DATA=1 runs durable queues on a data directory
// (WARREN_SCALE_CHURN_STORE_MEMORY sets Options.Storage.Memory). A measuring
// tool, not a check: TestEngineQueueChurnKeepsNoMemory is the check.
func TestScaleChurnProbe(t *testing.T) {
	spec := os.Getenv("WARREN_SCALE_CHURN")
	if spec == "" {
		t.Skip("WARREN_SCALE_CHURN not set")
	}
	var total, burst int
	_, err := fmt.Sscanf(spec, "%d,%d", &total, &burst)
	require.NoError(t, err, "WARREN_SCALE_CHURN is total,burst")
	opts := broker.Options{Management: broker.ManagementOptions{StatsInterval: time.Second}}
	durable := os.Getenv("WARREN_SCALE_CHURN_DATA") != ""
	if durable {
		opts.DataDir = t.TempDir()
		opts.Storage.Memory, _ = strconv.ParseInt(os.Getenv("WARREN_SCALE_CHURN_STORE_MEMORY"), 10, 64)
	}
	b := brokertest.NewUnstarted(t, opts)
	brokertest.Start(t, b)
	_ = b.ManagementHandler() // starts the rate sampler
	conn, err := amqp091.Dial(b.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	report := func(done int) {
		if done > 0 {
			time.Sleep(opts.Management.StatsInterval + opts.Management.StatsInterval/2) // the sampler forgets the deleted queues
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		inuse := ms.HeapInuse
		rss, _ := procStatus("VmRSS")
		live := measure.LiveHeap()
		runtime.ReadMemStats(&ms)
		t.Logf("cycles %7d: RSS %4d MiB, heap in use %3d MiB (%3d MiB after a GC), live heap %6d KiB, goroutines %d",
			done, rss>>20, inuse>>20, ms.HeapInuse>>20, live>>10, runtime.NumGoroutine())
	}
	report(0)
	start := time.Now()
	for done, r := 0, 0; done < total; r++ {
		n := min(burst, total-done)
		for i := range n {
			_, err := ch.QueueDeclare(fmt.Sprintf("churn-%d-%d", r, i), durable, false, false, false, nil)
			require.NoError(t, err)
		}
		for i := range n {
			_, err := ch.QueueDelete(fmt.Sprintf("churn-%d-%d", r, i), false, false, false)
			require.NoError(t, err)
		}
		if done/50_000 != (done+n)/50_000 || done+n == total {
			report(done + n)
		}
		done += n
	}
	t.Logf("%d cycles in %v", total, time.Since(start).Round(time.Second))
}
