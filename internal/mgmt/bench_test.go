package mgmt_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// BenchmarkManagementQueues measures GET /api/queues on a broker with 100
// queues of 10 messages each and one client connection: a snapshot of
// every queue's counts.
func BenchmarkManagementQueues(b *testing.B) {
	br := brokertest.NewUnstarted(b, broker.Options{})
	ch, err := brokertest.Dial(b, br).Channel()
	require.NoError(b, err)
	for q := range 100 {
		name := fmt.Sprint("q", q)
		amqptest.DeclareQueue(b, ch, name, false)
		amqptest.PublishBodies(b, ch, name, false, slices.Repeat([]string{"x"}, 10)...)
	}
	require.NoError(b, br.WaitIdle(context.Background()))
	h := br.ManagementHandler()
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("GET", "/api/queues", nil)
		req.SetBasicAuth("guest", "guest")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkManagementQueuesSorted measures one page of GET /api/queues on
// a broker with 10,000 queues (one in ten holding a message), sorted by
// each kind of key the console sorts by: a count, a message_stats counter
// and a rate. Every sort but by name asks every queue; the JSON of the
// queues is what the sorts may or may not build.
func BenchmarkManagementQueuesSorted(b *testing.B) {
	br := brokertest.NewUnstarted(b, broker.Options{})
	ch, err := brokertest.Dial(b, br).Channel()
	require.NoError(b, err)
	for q := range 10_000 {
		name := fmt.Sprintf("queue-%05d", q)
		amqptest.DeclareQueue(b, ch, name, false)
		if q%10 == 0 {
			amqptest.PublishBodies(b, ch, name, false, "x")
		}
	}
	require.NoError(b, br.WaitIdle(context.Background()))
	h := br.ManagementHandler()
	for _, sort := range []string{"messages", "message_stats.publish", "message_stats.publish_details.rate", "messages_ready_details.rate"} {
		b.Run(sort, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("GET", "/api/queues?page=1&page_size=50&sort_reverse=true&sort="+sort, nil)
				req.SetBasicAuth("guest", "guest")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}
