package mgmt_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/mgmt"
)

// overviewModel answers only what GET /api/overview and a login need; any
// other call panics (the embedded Broker is nil), so the test also shows
// the overview asks the model for nothing else.
type overviewModel struct {
	mgmt.Broker
}

func (overviewModel) NodeName() string { return "rabbit@test" }

func (overviewModel) Overview() mgmt.Overview {
	return mgmt.Overview{
		ProductVersion: "9.9.9", Listeners: []*net.TCPAddr{{IP: net.IPv4(127, 0, 0, 1), Port: 5673}},
		Connections: 2, Queues: 3, Ready: 4, Unacked: 1,
		Totals: mgmt.Counters{Published: 7, Delivered: 5, Got: 1},
	}
}

func (overviewModel) Authenticate(_ context.Context, name, password string, _ net.Addr) (mgmt.Caller, error) {
	if name == "ops" && password == "pw" {
		return mgmt.Caller{Name: "ops", Tags: []string{"monitoring"}}, nil
	}
	return mgmt.Caller{}, mgmt.ErrLoginFailed
}

// TestHandlerServesAnyModel: the handler is fed by the model alone, so a
// model that is not a broker is served like one.
func TestHandlerServesAnyModel(t *testing.T) {
	h := mgmt.New(overviewModel{}, mgmt.Config{})
	req := httptest.NewRequest("GET", "/api/overview", nil)
	req.SetBasicAuth("ops", "pw")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var o struct {
		Node      string `json:"node"`
		Product   string `json:"product_version"`
		Listeners []struct {
			IP   string `json:"ip_address"`
			Port int    `json:"port"`
		} `json:"listeners"`
		Totals       map[string]int `json:"object_totals"`
		Queues       map[string]int `json:"queue_totals"`
		MessageStats map[string]int `json:"message_stats"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &o))
	require.Equal(t, "rabbit@test", o.Node)
	require.Equal(t, "9.9.9", o.Product)
	require.Len(t, o.Listeners, 1)
	require.Equal(t, "127.0.0.1", o.Listeners[0].IP)
	require.Equal(t, 5673, o.Listeners[0].Port)
	require.Equal(t, 2, o.Totals["connections"])
	require.Equal(t, 3, o.Totals["queues"])
	require.Equal(t, map[string]int{"messages": 5, "messages_ready": 4, "messages_unacknowledged": 1}, o.Queues)
	require.Equal(t, 7, o.MessageStats["publish"])
	require.Equal(t, 6, o.MessageStats["deliver_get"])

	req = httptest.NewRequest("GET", "/api/overview", nil)
	req.SetBasicAuth("ops", "wrong")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	require.Equal(t, http.StatusUnauthorized, w.Code)
	require.Equal(t, `Basic realm="RabbitMQ Management"`, w.Header().Get("WWW-Authenticate"))
}
