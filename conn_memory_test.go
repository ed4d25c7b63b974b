package broker_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// idleConnBudget is what an open connection with one open channel and
// heartbeats on may cost the broker while idle: heap objects plus
// goroutine stacks. Its one goroutine, the reader parked in the poller,
// keeps a 4 KiB stack; the rest is heap.
const idleConnBudget = 9 << 10

// idleConnGoroutines is how many goroutines an idle connection keeps: its
// reader. The writer runs only while there is something to write, and
// heartbeats are ticked by one shared schedule.
const idleConnGoroutines = 1

// openIdleConns opens n connections to addr with parallel raw clients,
// each through the handshake (accepting the server's heartbeat) and
// channel.open on channel 1, and returns the sockets, left idle: nothing
// reads them, so the client side holds no buffer and no goroutine, only
// the socket. The sockets are closed on cleanup.
func openIdleConns(tb testing.TB, addr string, n int) []net.Conn {
	tb.Helper()
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	const dialers = 8
	for d := range dialers {
		wg.Go(func() {
			for i := d; i < n; i += dialers {
				nc, err := net.Dial("tcp", addr)
				if !assertNoError(tb, err) {
					return
				}
				conns[i] = nc
				rc := amqptest.NewRawClient(tb, nc)
				tune := rc.StartToTune()
				rc.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: tune.Heartbeat})
				rc.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
				rc.SendMethod(1, &amqp.ChannelOpen{})
				if _, ok := rc.ExpectMethod(0).(*amqp.ConnectionOpenOk); !ok {
					tb.Errorf("connection %d: no open-ok", i)
					return
				}
				if _, ok := rc.ExpectMethod(1).(*amqp.ChannelOpenOk); !ok {
					tb.Errorf("connection %d: no channel open-ok", i)
					return
				}
			}
		})
	}
	wg.Wait()
	tb.Cleanup(func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	})
	if tb.Failed() {
		tb.FailNow()
	}
	return conns
}

// assertNoError is require.NoError for a goroutine other than the test's.
func assertNoError(tb testing.TB, err error) bool {
	if err != nil {
		tb.Errorf("%v", err)
		return false
	}
	return true
}

// liveBytes is the process's heap in live objects plus its goroutine
// stacks, after a collection (two: the second frees what the first's
// finalizers and stack shrinking left).
func liveBytes() uint64 {
	heap, stacks := liveHeapAndStacks()
	return heap + stacks
}

// liveHeapAndStacks is liveBytes in its two parts.
func liveHeapAndStacks() (heap, stacks uint64) {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
	}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// waitConnections waits until the broker counts n open connections.
func waitConnections(tb testing.TB, b *broker.Broker, n int) {
	tb.Helper()
	amqptest.Poll(tb, func() bool { return b.Stats(context.Background()).Connections >= n }, "%d connections open", n)
}

// TestIdleConnectionMemory guards the memory an idle connection costs:
// 500 connections, each with a channel and heartbeats on, must stay within
// idleConnBudget each (heap objects and stacks, the client's sockets
// included).
func TestIdleConnectionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 500 connections")
	}
	if raceEnabled {
		t.Skip("the race detector grows stacks and allocations past the budget")
	}
	const n = 500
	b := startBroker(t, broker.Options{Heartbeat: time.Minute})
	addr := b.Addr().String()
	openIdleConns(t, addr, 10) // warm up: pools, the vhost, the first growth of maps
	heap0, stacks0 := liveHeapAndStacks()
	g0 := runtime.NumGoroutine()
	conns := openIdleConns(t, addr, n)
	waitConnections(t, b, n+10)
	heap1, stacks1 := liveHeapAndStacks()
	heap, stacks := (int64(heap1)-int64(heap0))/n, (int64(stacks1)-int64(stacks0))/n
	perConn := heap + stacks
	t.Logf("%d idle connections: %d bytes each (heap objects %d, stacks %d)", n, perConn, heap, stacks)
	require.LessOrEqual(t, perConn, int64(idleConnBudget), "bytes per idle connection")
	// Writers still finishing their last write may linger a moment.
	amqptest.Poll(t, func() bool { return runtime.NumGoroutine()-g0 <= idleConnGoroutines*n }, "at most %d goroutine per idle connection", idleConnGoroutines)
	runtime.KeepAlive(conns)
}

// BenchmarkIdleConnections opens n connections (each with a channel and
// heartbeats on) to an in-process broker over loopback, with 8 clients
// dialling in parallel, and reports the broker's memory per connection
// (heap objects and goroutine stacks, from runtime/metrics, and the
// process's RSS from /proc/self/status; the client sockets' share is
// included, a few hundred bytes), the goroutines each keeps while idle,
// and how fast they were accepted and opened. One op opens them all: run it with -benchtime 1x. 10,000
// connections need 20,000 descriptors in this process: raise ulimit -n.
func BenchmarkIdleConnections(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("conns=%d", n), func(b *testing.B) {
			var lim syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*n+1000) {
				b.Skipf("needs %d descriptors, ulimit -n is %d", 2*n+1000, lim.Cur)
			}
			for b.Loop() {
				br := brokertest.NewUnstarted(b, broker.Options{Heartbeat: time.Minute})
				brokertest.Start(b, br)
				addr := br.Addr().String()
				openIdleConns(b, addr, 10)
				before, rssBefore := liveBytes(), rssBytes(b)
				g0 := runtime.NumGoroutine()
				start := time.Now()
				conns := openIdleConns(b, addr, n)
				elapsed := time.Since(start)
				waitConnections(b, br, n+10)
				after, rssAfter := liveBytes(), rssBytes(b)
				b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(n), "goroutines/conn")
				b.ReportMetric(float64(int64(after)-int64(before))/float64(n), "heap+stack-B/conn")
				b.ReportMetric(float64(int64(rssAfter)-int64(rssBefore))/float64(n), "RSS-B/conn")
				b.ReportMetric(float64(n)/elapsed.Seconds(), "conns/s")
				for _, nc := range conns {
					nc.Close()
				}
				require.NoError(b, br.Close())
			}
		})
	}
}

// rssBytes is the process's resident set (VmRSS).
func rssBytes(tb testing.TB) uint64 {
	tb.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(tb, err)
			return kb << 10
		}
	}
	tb.Skip("no VmRSS in /proc/self/status")
	return 0
}
