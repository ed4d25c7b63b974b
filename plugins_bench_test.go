package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/internal/measure"
)

// rss returns the process's resident set size in bytes (Linux; 0
// elsewhere).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// BenchmarkDelayedBacklog holds a backlog of persistent 1 KiB delayed
// messages in a durable x-delayed-message exchange on Pebble (1,000,000;
// 20,000 with -short), due in 10 to 20 minutes, and reports the process's
// RSS and live heap idle and with the backlog held, then routes 1,000
// probe messages due over 5 s through the same exchange and reports their
// lateness by the scheduler's clock: from due to handed to the queue
// (routed), and to stored there, synced (stored).
// Run it alone: go test -run XXX -bench DelayedBacklog -benchtime 1x .
func BenchmarkDelayedBacklog(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 20_000
	}
	for range b.N {
		benchDelayedBacklog(b, n)
	}
}

func benchDelayedBacklog(b *testing.B, n int) {
	ctx := context.Background()
	br, err := New(Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	ch, err := br.Channel(ctx)
	if err != nil {
		b.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare("delayed", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
	_, err = ch.QueueDeclare("due", true, false, false, false, nil)
	must(err)
	must(ch.QueueBind("due", "k", "delayed", false, nil))

	runtime.GC()
	debug.FreeOSMemory()
	idleRSS, idleHeap := rss(), measure.LiveHeap()

	body := make([]byte, 1024)
	start := time.Now()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		delay := 600_000 + r.Int32N(600_000)
		must(ch.PublishWithContext(ctx, "delayed", "k", false, false, amqp091.Publishing{
			Headers: amqp091.Table{"x-delay": delay}, DeliveryMode: amqp091.Persistent,
			MessageId: strconv.Itoa(i), Body: body,
		}))
	}
	for {
		c, err := br.DelayedCount("/", "delayed")
		must(err)
		if c == int64(n) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	load := time.Since(start)
	runtime.GC()
	debug.FreeOSMemory()
	heldRSS, heldHeap := rss(), measure.LiveHeap()

	// Probes: 1,000 messages due over 5 s, with the backlog in place.
	var mu sync.Mutex
	var late, routed []time.Duration
	const probes = 1000
	done := make(chan struct{})
	br.plugins.delayed.Scheduler().SetLateness(func(r, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		late = append(late, d)
		routed = append(routed, r)
		if len(late) == probes {
			close(done)
		}
	})
	for i := range probes {
		must(ch.PublishWithContext(ctx, "delayed", "k", false, false, amqp091.Publishing{
			Headers: amqp091.Table{"x-delay": int32(200 + i*5)}, DeliveryMode: amqp091.Persistent, Body: body,
		}))
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatal("probes not routed within a minute")
	}
	br.plugins.delayed.Scheduler().SetLateness(nil)
	mu.Lock()
	slices.Sort(late)
	slices.Sort(routed)
	p50, p99, pmax := late[len(late)/2], late[len(late)*99/100], late[len(late)-1]
	r50, r99 := routed[len(routed)/2], routed[len(routed)*99/100]
	mu.Unlock()

	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(float64(n), "held")
	b.ReportMetric(mib(idleRSS), "idle-RSS-MiB")
	b.ReportMetric(mib(heldRSS), "held-RSS-MiB")
	b.ReportMetric(mib(idleHeap), "idle-heap-MiB")
	b.ReportMetric(mib(heldHeap), "held-heap-MiB")
	b.ReportMetric(float64(r50.Microseconds())/1000, "p50-routed-late-ms")
	b.ReportMetric(float64(r99.Microseconds())/1000, "p99-routed-late-ms")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-late-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-late-ms")
	b.ReportMetric(float64(pmax.Microseconds())/1000, "max-late-ms")
	b.ReportMetric(load.Seconds(), "load-s")
	fmt.Fprintf(os.Stderr, "delayed backlog %d: RSS idle %.0f MiB, held %.0f MiB; live heap idle %.1f MiB, held %.1f MiB; load %s; lateness when routed p50 %s p99 %s, when stored p50 %s p99 %s max %s\n",
		n, mib(idleRSS), mib(heldRSS), mib(idleHeap), mib(heldHeap), load.Round(time.Millisecond), r50, r99, p50, p99, pmax)
}
