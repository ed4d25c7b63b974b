package mgmt_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// page is RabbitMQ's paged listing.
type page struct {
	FilteredCount int              `json:"filtered_count"`
	ItemCount     int              `json:"item_count"`
	Items         []map[string]any `json:"items"`
	Page          int              `json:"page"`
	PageCount     int              `json:"page_count"`
	PageSize      int              `json:"page_size"`
	TotalCount    int              `json:"total_count"`
}

func names(items []map[string]any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it["name"].(string)
	}
	return out
}

// TestQueuesPagination: GET /api/queues with page answers RabbitMQ's paged
// object, filtered by name (substring or regex, case-insensitive) and
// sorted by name or by a field; without page it is the plain list as
// before.
func TestQueuesPagination(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := brokertest.Channel(t, b)
	for i := range 12 {
		name := fmt.Sprintf("q%02d", i)
		if i%4 == 0 {
			name = fmt.Sprintf("Orders.%02d", i)
		}
		_, err := ch.QueueDeclare(name, false, false, false, false, nil)
		require.NoError(t, err)
		for range i {
			require.NoError(t, ch.Publish("", name, false, false, amqp091.Publishing{Body: []byte("x")}))
		}
	}
	amqptest.Idle(t, b.WaitIdle)

	get := func(path string) page {
		t.Helper()
		status, _, body := h.Do("GET", path, "guest", nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
		var p page
		require.NoError(t, json.Unmarshal(body, &p), "%s", body)
		return p
	}

	for _, tc := range []struct {
		path                                 string
		names                                []string
		filtered, pageCount, pageSize, total int
	}{
		{"/api/queues?page=1&page_size=5", []string{"Orders.00", "Orders.04", "Orders.08", "q01", "q02"}, 12, 3, 5, 12},
		{"/api/queues?page=3&page_size=5", []string{"q10", "q11"}, 12, 3, 5, 12},
		{"/api/queues/%2F?page=1", nil, 12, 1, 100, 12},
		{"/api/queues?page=1&page_size=2&name=orders", []string{"Orders.00", "Orders.04"}, 3, 2, 2, 12},
		{"/api/queues?page=1&name=%5Eq0%5B12%5D%24&use_regex=true", []string{"q01", "q02"}, 2, 1, 100, 12},
		{"/api/queues?page=1&page_size=3&sort=name&sort_reverse=true", []string{"q11", "q10", "q09"}, 12, 4, 3, 12},
		{"/api/queues?page=1&page_size=3&sort=messages&sort_reverse=true", []string{"q11", "q10", "q09"}, 12, 4, 3, 12},
		{"/api/queues?page=1&page_size=2&sort=messages", []string{"Orders.00", "q01"}, 12, 6, 2, 12},
		// A nested field, sorted on the JSON objects rather than the typed queues.
		{"/api/queues?page=1&page_size=3&sort=message_stats.publish&sort_reverse=true", []string{"q11", "q10", "q09"}, 12, 4, 3, 12},
		{"/api/queues?page=1&page_size=2&sort=nosuchfield&name=q0", []string{"q01", "q02"}, 7, 4, 2, 12},
		// A page just past the last item is empty, as RabbitMQ's.
		{"/api/queues?page=2&page_size=3&name=orders", []string{}, 3, 1, 3, 12},
	} {
		t.Run(tc.path, func(t *testing.T) {
			p := get(tc.path)
			if tc.names == nil {
				require.Len(t, p.Items, p.ItemCount)
			} else {
				require.Equal(t, tc.names, names(p.Items))
			}
			require.Equal(t, len(p.Items), p.ItemCount)
			require.Equal(t, tc.filtered, p.FilteredCount)
			require.Equal(t, tc.pageCount, p.PageCount)
			require.Equal(t, tc.pageSize, p.PageSize)
			require.Equal(t, tc.total, p.TotalCount)
		})
	}

	// Items carry their counts, as the plain list's do.
	p := get("/api/queues?page=1&page_size=1&name=q11")
	require.EqualValues(t, 11, p.Items[0]["messages_ready"])

	// Without page: the plain list, sorted when asked.
	list := h.Get("/api/queues?page_size=2&name=orders").([]any)
	require.Len(t, list, 12)
	list = h.Get("/api/queues?sort=messages_ready&sort_reverse=true").([]any)
	require.Equal(t, "q11", list[0].(map[string]any)["name"])
}

// TestListingsPaginationErrors: bad page parameters are 400 with
// RabbitMQ's error and reason, on every paged listing.
func TestListingsPaginationErrors(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	for _, list := range []string{"/api/queues", "/api/exchanges", "/api/connections", "/api/channels"} {
		for _, tc := range []struct{ query, errText, reason string }{
			{"page=x", "bad_request", "Pagination parameters are invalid"},
			{"page=1&page_size=", "bad_request", "Pagination parameters are invalid"},
			{"page_size=abc", "bad_request", "Pagination parameters are invalid"},
			{"page=0", "invalid_pagination_parameters", "Invalid pagination parameters: page number 0, page size undefined"},
			{"page=-1&page_size=10", "invalid_pagination_parameters", "Invalid pagination parameters: page number -1, page size 10"},
			{"page=1&page_size=501", "invalid_pagination_parameters", "Invalid pagination parameters: page number 1, page size 501"},
			{"page=1&page_size=0", "invalid_pagination_parameters", "Invalid pagination parameters: page number 1, page size 0"},
			{"page=1&name=(&use_regex=true", "bad_request", "Pagination parameters are invalid"},
			{"page=9&page_size=500", "page_out_of_range", ""},
			// (page-1)*500 wraps to 0 in 64 bits.
			{"page=4611686018427387905&page_size=500", "page_out_of_range", "Page out of range, page: 4611686018427387905 page size: 500, len: "},
		} {
			t.Run(list+"?"+tc.query, func(t *testing.T) {
				status, _, body := h.Do("GET", list+"?"+tc.query, "guest", nil)
				require.Equal(t, http.StatusBadRequest, status, "%s", body)
				errText, reason := amqptest.ErrorBody(t, body)
				require.Equal(t, tc.errText, errText)
				if strings.HasSuffix(tc.reason, "len: ") {
					require.True(t, strings.HasPrefix(reason, tc.reason), reason)
				} else if tc.reason != "" {
					require.Equal(t, tc.reason, reason)
				} else {
					require.Regexp(t, `^Page out of range, page: 9 page size: 500, len: \d+$`, reason)
				}
			})
		}
	}
}

// TestExchangesPagination: exchanges page like queues (filtered by name,
// sorted by vhost and name).
func TestExchangesPagination(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, body := h.Do("GET", "/api/exchanges?page=1&page_size=3&name=amq.", "guest", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var p page
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, []string{"amq.direct", "amq.fanout", "amq.headers"}, names(p.Items))
	require.Equal(t, 3, p.ItemCount)
	require.Greater(t, p.TotalCount, p.FilteredCount)
	require.Equal(t, (p.FilteredCount+2)/3, p.PageCount)
}
