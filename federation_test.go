package broker_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	broker "github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
)

func TestFederationParametersChecked(t *testing.T) {
	b := brokertest.New(t)
	ctx := context.Background()
	a := b.Admin()
	for _, tc := range []struct {
		component, value, refusal string
	}{
		{"federation-upstream", `{"uri":"amqp://127.0.0.1","max-hops":2}`, ""},
		{"federation-upstream", `{"prefetch-count":"x"}`, "Validation failed\n\nKey \"uri\" not found in up\nprefetch-count should be a number, actually was <<\"x\">>\n"},
		{"federation-upstream-set", `[{"upstream":"up"}]`, ""},
		{"federation-upstream-set", `[{"upstream":"up","ack-mode":"sometimes"}]`, "Validation failed\n\nack-mode should be one of [<<\"no-ack\">>,<<\"on-publish\">>,<<\"on-confirm\">>], actually was <<\"sometimes\">>\n"},
	} {
		_, err := a.PutParameter(ctx, broker.Parameter{VHost: "/", Component: tc.component, Name: "up", Value: json.RawMessage(tc.value)})
		if tc.refusal == "" {
			require.NoError(t, err, tc.value)
			continue
		}
		require.Error(t, err, tc.value)
		require.Contains(t, err.Error(), tc.refusal)
	}
	got, err := a.ListParameters(ctx, "federation-upstream", "/")
	require.NoError(t, err)
	require.Len(t, got, 1)
}
