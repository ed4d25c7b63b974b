package mgmt_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/measure"
	"github.com/warrenmq/broker/internal/mgmt"
)

// TestManagementGetHeapBounded: a get of many large messages holds about
// one of them at a time, not the whole answer (it once kept 3.7 GB for
// 20 × 20 MiB). The live heap is sampled while the client reads the
// answer; before the fix it held the whole encoded list (here about
// 85 MiB) until the last byte went out.
func TestManagementGetHeapBounded(t *testing.T) {
	const n, size = 16, 4 << 20
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("big", false, false, false, false, nil)
	require.NoError(t, err)
	body := bytes.Repeat([]byte{0xff}, size) // not UTF-8: sent in base64
	for range n {
		require.NoError(t, ch.Publish("", "big", false, false, amqp091.Publishing{Body: body}))
	}
	amqptest.Idle(t, b.WaitIdle)
	body = nil
	base := measure.LiveHeap()

	req, err := http.NewRequest("POST", h.URL()+"/api/queues/%2F/big/get",
		strings.NewReader(`{"count":16,"ackmode":"ack_requeue_true","encoding":"auto"}`))
	require.NoError(t, err)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var peak int64
	var got bytes.Buffer // the answer, shrunk: payloads replaced by their length
	buf := make([]byte, 1<<20)
	read := 0
	for {
		k, err := resp.Body.Read(buf)
		read += k
		if read >= 4<<20 {
			read = 0
			peak = max(peak, measure.LiveHeap()-min(base, measure.LiveHeap()))
		}
		got.Write(bytes.ReplaceAll(buf[:k], []byte("////"), nil))
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	t.Logf("live heap above the start while the answer streamed: at most %d MiB", peak>>20)
	require.Less(t, peak, int64(24<<20), "one message at a time, not %d MiB", n*size>>20)

	var results []struct {
		PayloadBytes    int    `json:"payload_bytes"`
		PayloadEncoding string `json:"payload_encoding"`
		Payload         string `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(got.Bytes(), &results), "%.200s", got.Bytes())
	require.Len(t, results, n)
	for _, r := range results {
		require.Equal(t, size, r.PayloadBytes)
		require.Equal(t, "base64", r.PayloadEncoding)
		require.Empty(t, strings.Trim(r.Payload, "/w="), "all 0xff")
	}
}

// TestManagementGetTruncate: truncate cuts the payload before it is
// encoded and payload_bytes stays the full size, as in RabbitMQ.
func TestManagementGetTruncate(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("t", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Publish("", "t", false, false, amqp091.Publishing{Body: []byte("hello \"world\"\n\u2028")}))
	amqptest.Idle(t, b.WaitIdle)
	for _, tc := range []struct {
		truncate any
		payload  string
	}{{nil, "hello \"world\"\n\u2028"}, {5, "hello"}, {"7", "hello \""}, {0, ""}, {1000, "hello \"world\"\n\u2028"}} {
		req := map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}
		if tc.truncate != nil {
			req["truncate"] = tc.truncate
		}
		status, _, body := h.Do("POST", "/api/queues/%2F/t/get", "guest", req)
		require.Equal(t, http.StatusOK, status, "%s", body)
		var res []map[string]any
		require.NoError(t, json.Unmarshal(body, &res), "%s", body)
		require.Len(t, res, 1)
		require.Equal(t, tc.payload, res[0]["payload"])
		require.Equal(t, "string", res[0]["payload_encoding"])
		require.EqualValues(t, 17, res[0]["payload_bytes"])
	}
}

// getAnswer is one message of a get's answer as a client decodes it.
type getAnswer struct {
	mgmt.GetResult
	Payload         string `json:"payload"`
	PayloadEncoding string `json:"payload_encoding"`
}
