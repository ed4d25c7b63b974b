package broker_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// BenchmarkStreamFanOut publishes a stream of WARREN_STREAM_BENCH_N
// messages (default 1,000,000, 100-byte bodies) to examples/server on
// Pebble, then reads it from first with 10 consumers at once, each on its
// own connection (prefetch 1000, an ack multiple every 100), three times:
// when the stream holds a tenth of the messages, half of them and all. It reports msg/s per consumer, the server process's CPU per
// delivered message (from /proc, so the clients' CPU is not in it), its
// resident memory and its Go heap after each read: the heap must not grow
// with the stream; the RSS adds Pebble's bounded cache and memtables.
// WARREN_STREAM_BENCH_STORE_MEMORY passes the server -store-memory (bytes).
// b.N is ignored: one run is the measurement. Linux only (/proc).
func BenchmarkStreamFanOut(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("needs /proc")
	}
	n := 1_000_000
	if s := os.Getenv("WARREN_STREAM_BENCH_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	const consumers = 10
	bin := buildServer(b)
	dir := filepath.Join(b.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	flags := []string{"-http", "127.0.0.1:0"}
	if m := os.Getenv("WARREN_STREAM_BENCH_STORE_MEMORY"); m != "" {
		flags = append(flags, "-store-memory", m) // bytes: Options.Storage.Memory
	}
	srv := startServer(b, bin, dir, flags...)
	pid := srv.Pid()
	metricsURL := "http://" + srv.HTTPAddr + "/metrics"
	conn, err := amqp091.Dial(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ch.QueueDeclare("s", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for _, stage := range []int{n / 10, n / 2, n} {
		start := time.Now()
		publishBench(b, conn, stage-int(publishedSoFar(b, ch)))
		b.Logf("stream of %d: published in %v", stage, time.Since(start).Round(time.Millisecond))
		cpu0 := benchProcCPU(b, pid)
		start = time.Now()
		var wg sync.WaitGroup
		rates := make([]float64, consumers)
		for i := range consumers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				readStreamBench(b, srv.URL(), stage)
				rates[i] = float64(stage) / time.Since(t0).Seconds()
			}()
		}
		wg.Wait()
		wall := time.Since(start)
		cpu := benchProcCPU(b, pid) - cpu0
		rss, hwm := benchProcMem(b, pid)
		heap := benchGoHeap(b, metricsURL)
		var sum float64
		for _, r := range rates {
			sum += r
		}
		b.Logf("stream of %d, %d consumers from first: %v, %.0f msg/s per consumer (%.0f in all), server CPU %.0f ns per delivery, RSS %d MiB (peak %d MiB), Go heap in use %d MiB",
			stage, consumers, wall.Round(time.Millisecond), sum/consumers, sum, float64(cpu.Nanoseconds())/float64(consumers*stage), rss>>20, hwm>>20, heap>>20)
		b.ReportMetric(sum/consumers, fmt.Sprintf("msg/s/consumer@%d", stage))
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(consumers*stage), fmt.Sprintf("server-cpu-ns/delivery@%d", stage))
		b.ReportMetric(float64(rss>>20), fmt.Sprintf("server-rss-MiB@%d", stage))
		b.ReportMetric(float64(heap>>20), fmt.Sprintf("server-heap-MiB@%d", stage))
	}
}

func publishedSoFar(b *testing.B, ch *amqp091.Channel) int {
	q, err := ch.QueueDeclarePassive("s", true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	return q.Messages
}

// publishBench publishes n messages with confirms, up to 2000 in flight.
func publishBench(b *testing.B, conn *amqp091.Connection, n int) {
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4096))
	body := bytes.Repeat([]byte("x"), 100)
	const window = 2000
	acked := 0
	for i := range n {
		if i-acked >= window {
			if c := <-confirms; !c.Ack {
				b.Fatal("nacked")
			}
			acked++
		}
		if err := ch.PublishWithContext(context.Background(), "", "s", false, false, amqp091.Publishing{Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	for ; acked < n; acked++ {
		if c := <-confirms; !c.Ack {
			b.Fatal("nacked")
		}
	}
}

// readStreamBench reads n messages from first on its own connection.
func readStreamBench(b *testing.B, url string, n int) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		b.Error(err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		b.Error(err)
		return
	}
	if err := ch.Qos(1000, 0, false); err != nil {
		b.Error(err)
		return
	}
	ds, err := ch.Consume("s", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		b.Error(err)
		return
	}
	for i := 1; i <= n; i++ {
		d, ok := <-ds
		if !ok {
			b.Errorf("consumer closed after %d", i)
			return
		}
		if i%100 == 0 || i == n {
			if err := d.Ack(true); err != nil {
				b.Error(err)
				return
			}
		}
	}
}

// benchProcCPU is pid's user+system CPU time (/proc/PID/stat, USER_HZ 100).
func benchProcCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// benchGoHeap is the server's go_memstats_heap_inuse_bytes: the broker's
// own memory. Pebble's block cache and memtables are allocated outside the
// Go heap (cgo builds), bounded by its options (64 MiB each), and are the
// rest of the RSS.
func benchGoHeap(b *testing.B, url string) int64 {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int64(f)
		}
	}
	b.Fatal("no go_memstats_heap_inuse_bytes")
	return 0
}

// benchProcMem is pid's resident and peak resident bytes.
func benchProcMem(b *testing.B, pid int) (rss, hwm int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm
}
