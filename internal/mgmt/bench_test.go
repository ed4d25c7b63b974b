package mgmt_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
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
		_, err := ch.QueueDeclare(name, false, false, false, false, nil)
		require.NoError(b, err)
		for range 10 {
			require.NoError(b, ch.PublishWithContext(context.Background(), "", name, false, false, amqp091.Publishing{Body: []byte("x")}))
		}
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
