package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/rates"
)

// BenchmarkRateSampleRound measures one round of the rate sampler over
// 10,000 queues (each queue's counts read, no actor asked): the CPU the
// history costs every Management.StatsInterval.
func BenchmarkRateSampleRound(b *testing.B) {
	br, err := New(Options{Management: ManagementOptions{StatsInterval: -1}})
	require.NoError(b, err)
	defer br.Close()
	ch, err := br.Channel(context.Background())
	require.NoError(b, err)
	for i := range 10_000 {
		_, err := ch.QueueDeclare(fmt.Sprint("q", i), false, false, false, false, nil)
		require.NoError(b, err)
	}
	rec := rates.New(rates.Config{})
	now := time.Now()
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(5 * time.Second)
		br.sampleRound(rec, now)
	}
	objects, _ := rec.Len()
	require.Equal(b, 10_000+3, objects, "the queues, the vhost, the broker and the channel's connection")
}

// BenchmarkListIdleQueues serves a page of the queue listing and a
// Prometheus scrape over 10,000 idle queues, each from idle: goroutines
// started per op counts the actors the read woke.
func BenchmarkListIdleQueues(b *testing.B) {
	const n = 10_000
	br, err := New(Options{Management: ManagementOptions{StatsInterval: -1}})
	require.NoError(b, err)
	defer br.Close()
	qs := declareIdleQueues(b, br, n)
	for _, bc := range []struct {
		name, path string
		h          http.Handler
	}{
		{"api-page", "/api/queues?page=1&page_size=50", br.ManagementHandler()},
		{"metrics", "/metrics", br.MetricsHandler(MetricsOptions{})},
		{"metrics-per-object", "/metrics", br.MetricsHandler(MetricsOptions{PerObject: true})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var started uint64
			for b.Loop() {
				b.StopTimer()
				// From idle, as a scrape every 15 s finds the queues.
				qs.wait(b)
				req := httptest.NewRequest("GET", bc.path, nil)
				req.SetBasicAuth("guest", "guest")
				rec := httptest.NewRecorder()
				before := goroutinesCreated()
				b.StartTimer()
				bc.h.ServeHTTP(rec, req)
				started += goroutinesCreated() - before
				require.Equal(b, http.StatusOK, rec.Code)
			}
			b.ReportMetric(float64(started)/float64(b.N), "goroutines/op")
		})
	}
}

// idleQueues is n queues named q0, q1, ... holding one message each,
// whose actors' goroutines exit after 0.5-1 s idle.
type idleQueues struct {
	n    int
	base int // goroutines before the queues were declared
}

// declareIdleQueues declares the queues of idleQueues and waits until
// their actors have exited.
func declareIdleQueues(t testing.TB, br *Broker, n int) idleQueues {
	t.Helper()
	ch, err := br.Channel(context.Background())
	require.NoError(t, err)
	qs := idleQueues{n: n, base: runtime.NumGoroutine()}
	for i := range n {
		name := fmt.Sprint("q", i)
		_, err := ch.QueueDeclare(name, false, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.PublishWithContext(context.Background(), "", name, false, false, amqp091.Publishing{Body: []byte("x")}))
	}
	require.Equal(t, uint64(n), br.Stats(context.Background()).Ready) // asks every actor: all published
	qs.wait(t)
	return qs
}

// wait returns once (almost) every queue's actor has exited.
func (qs idleQueues) wait(t testing.TB) {
	t.Helper()
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= qs.base+10 }, 10*time.Second, 10*time.Millisecond)
}

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// requireWakesNone waits for the queues to be idle, runs read and fails
// when it started their actors' goroutines (one each; the few others
// allowed are the HTTP machinery's).
func (qs idleQueues) requireWakesNone(t *testing.T, what string, read func()) {
	t.Helper()
	qs.wait(t)
	before := goroutinesCreated()
	read()
	require.Less(t, goroutinesCreated()-before, uint64(20), "%s started the queues' actors (one goroutine each)", what)
}

// The rate sampler and the overview read every queue's counts without
// starting its actor: idle queues keep no goroutine through them, and the
// counts are right.
func TestSamplingWakesNoQueue(t *testing.T) {
	const n = 200
	br, err := New(Options{})
	require.NoError(t, err)
	defer br.Close()
	qs := declareIdleQueues(t, br, n)
	qs.requireWakesNone(t, "the sampler", func() {
		br.sampleRound(rates.New(rates.Config{}), time.Now())
		s := br.stats(context.Background(), noDetails)
		require.Equal(t, n, s.Queues)
		require.Equal(t, uint64(n), s.Ready)
	})
}

// Listing queues in the management API (whole, by vhost, by page), one
// queue's GET and a Prometheus scrape read what each queue published
// without starting its actor, and report what the actor answers.
func TestListingAndScrapeWakeNoQueue(t *testing.T) {
	const n = 1000
	br, err := New(Options{Management: ManagementOptions{StatsInterval: -1}})
	require.NoError(t, err)
	defer br.Close()
	qs := declareIdleQueues(t, br, n)
	get := func(h http.Handler, path string) string { return getOK(t, h, path) }
	api := br.ManagementHandler()
	var listed []struct {
		Name   string `json:"name"`
		Ready  uint64 `json:"messages_ready"`
		Memory uint64 `json:"memory"`
	}
	for _, tc := range []struct {
		name, path string
		check      func(t *testing.T, body string)
	}{
		{"every queue", "/api/queues", func(t *testing.T, body string) {
			require.NoError(t, json.Unmarshal([]byte(body), &listed))
			require.Len(t, listed, n)
			for _, q := range listed {
				require.Equal(t, uint64(1), q.Ready, q.Name)
				require.Greater(t, q.Memory, uint64(0), q.Name)
			}
		}},
		{"a vhost's", "/api/queues/%2F", func(t *testing.T, body string) {
			require.Equal(t, n, strings.Count(body, `"messages_ready":1,`))
		}},
		{"a page", "/api/queues?page=1&page_size=50", func(t *testing.T, body string) {
			require.Contains(t, body, `"filtered_count":1000`)
			require.Equal(t, 50, strings.Count(body, `"messages_ready":1,`))
		}},
		{"a page sorted by length", "/api/queues?page=2&page_size=50&sort=messages_ready", func(t *testing.T, body string) {
			require.Contains(t, body, `"filtered_count":1000`)
			require.Equal(t, 50, strings.Count(body, `"messages_ready":1,`))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qs.requireWakesNone(t, tc.path, func() { tc.check(t, get(api, tc.path)) })
		})
	}
	for _, tc := range []struct {
		name string
		h    http.Handler
		want string
	}{
		{"aggregated", br.MetricsHandler(MetricsOptions{}), "\nrabbitmq_queue_messages_ready 1000\n"},
		{"per object", br.MetricsHandler(MetricsOptions{PerObject: true}), `rabbitmq_queue_messages_ready{vhost="/",queue="q999"} 1` + "\n"},
	} {
		t.Run("metrics "+tc.name, func(t *testing.T) {
			qs.requireWakesNone(t, "a scrape", func() {
				require.Contains(t, get(tc.h, "/metrics"), tc.want)
			})
		})
	}
	t.Run("one queue", func(t *testing.T) {
		qs.requireWakesNone(t, "GET of one queue", func() {
			var one struct {
				Ready  uint64 `json:"messages_ready"`
				Memory uint64 `json:"memory"`
			}
			require.NoError(t, json.Unmarshal([]byte(get(api, "/api/queues/%2F/"+listed[0].Name)), &one))
			require.Equal(t, listed[0].Ready, one.Ready)
			require.Equal(t, listed[0].Memory, one.Memory)
		})
	})
	// What was read without the actor is what the actor answers.
	vh, ok := br.lookupVHost("/")
	require.True(t, ok)
	q, ok := vh.LookupQueue(listed[0].Name)
	require.True(t, ok)
	u, err := q.Usage(context.Background())
	require.NoError(t, err)
	require.Equal(t, listed[0].Ready, u.Ready)
	require.Equal(t, listed[0].Memory, u.Memory)
}
