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
