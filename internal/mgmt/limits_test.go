package mgmt_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/vhost"
)

// TestNameLimitsAtEveryDoor: HTTP, definitions and the direct Go channel
// refuse what AMQP's codec cannot carry (names over 255 bytes, names that
// are not UTF-8, argument tables larger than a frame), and store nothing;
// an oversized HTTP body is refused before it is read whole.
func TestNameLimitsAtEveryDoor(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ctx := context.Background()
	long := strings.Repeat("n", 100_000)
	frameArgs := map[string]any{"arguments": map[string]any{"x-pad": strings.Repeat("a", vhost.DefaultMaxArgumentsSize)}}
	hugeBody := `{"arguments":{"x-pad":"` + strings.Repeat("a", 60<<20) + `"}}`

	t.Run("http", func(t *testing.T) {
		for _, tc := range []struct {
			name, path string
			body       any
			status     int
		}{
			{"queue name of 100000 bytes", "/api/queues/%2F/" + long, map[string]any{"durable": true}, 400},
			{"queue name of 256 bytes", "/api/queues/%2F/" + strings.Repeat("n", 256), map[string]any{}, 400},
			{"queue name not UTF-8", "/api/queues/%2F/bad%FF%FE", map[string]any{}, 400},
			{"queue arguments larger than a frame", "/api/queues/%2F/padded", frameArgs, 400},
			{"60 MiB body", "/api/queues/%2F/huge", hugeBody, 413},
			{"exchange name of 256 bytes", "/api/exchanges/%2F/" + strings.Repeat("x", 256), map[string]any{"type": "direct"}, 400},
			{"exchange name not UTF-8", "/api/exchanges/%2F/x%C3%28", map[string]any{"type": "direct"}, 400},
			{"queue name of 255 bytes", "/api/queues/%2F/" + strings.Repeat("n", 255), map[string]any{}, 201},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, _, body := h.Do("PUT", tc.path, "guest", tc.body)
				require.Equal(t, tc.status, status, "%.300s", body)
			})
		}
		status, _, body := h.Do("POST", "/api/bindings/%2F/e/amq.direct/q/"+strings.Repeat("n", 255), "guest",
			map[string]any{"routing_key": strings.Repeat("k", 256)})
		require.Equal(t, 400, status, "%s", body)
	})

	t.Run("definitions", func(t *testing.T) {
		err := b.Admin().Import(ctx, &definitions.File{Queues: []definitions.Queue{{Name: strings.Repeat("d", 300), VHost: "/", Durable: true}}})
		require.Error(t, err)
	})

	t.Run("direct channel", func(t *testing.T) {
		ch := brokertest.Channel(t, b)
		_, err := ch.QueueDeclare(strings.Repeat("c", 256), true, false, false, false, nil)
		var ae *amqp091.Error
		require.True(t, errors.As(err, &ae), "%v", err)
		require.Equal(t, amqp091.PreconditionFailed, ae.Code)
	})

	// Only the 255-byte queue was created.
	var names []string
	for _, q := range h.Get("/api/queues").([]any) {
		names = append(names, q.(map[string]any)["name"].(string))
	}
	require.Equal(t, []string{strings.Repeat("n", 255)}, names)
	require.Len(t, h.Get("/api/bindings/%2F").([]any), 1, "only the default exchange's binding")
}

// TestManagementBodyBound: a body over the bound gets 413 whatever its
// shape, and a definitions import may be larger.
func TestManagementBodyBound(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	big := `{"routing_key":"` + strings.Repeat("k", mgmt.MaxBody) + `"}`
	status, _, _ := h.Do("POST", "/api/bindings/%2F/e/amq.direct/q/x", "guest", big)
	require.Equal(t, http.StatusNotFound, status, "the path is checked first")
	status, _, _ = h.Do("PUT", "/api/queues/%2F/x", "guest", map[string]any{})
	require.Equal(t, http.StatusCreated, status)
	status, _, body := h.Do("POST", "/api/bindings/%2F/e/amq.direct/q/x", "guest", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, "%s", body)
	defs := `{"queues":[` + strings.Repeat(`{"name":"q","vhost":"/","durable":true},`, mgmt.MaxBody/40) + `{"name":"q","vhost":"/"}]}`
	status, _, body = h.Do("POST", "/api/definitions", "guest", defs)
	require.Equal(t, http.StatusBadRequest, status, "read whole, refused for its content: %s", body)
}
