package shovel

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
		check         func(t *testing.T, d Def)
	}{
		{name: "defaults", in: `{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://h/v","dest-queue":"b"}`,
			check: func(t *testing.T, d Def) {
				require.Equal(t, OnConfirm, d.AckMode)
				require.Equal(t, Never, d.DeleteAfter)
				require.Equal(t, DefaultPrefetch, d.Prefetch)
				require.Equal(t, 5*time.Second, d.ReconnectDelay)
				require.Equal(t, []string{"amqp://"}, d.SrcURIs)
			}},
		{name: "uri list and exchange", in: `{"src-protocol":"amqp091","src-uri":["amqp://a","amqp://b"],"src-exchange":"x","src-exchange-key":"k.#","dest-uri":"amqp://","dest-exchange":"y","dest-exchange-key":"z","ack-mode":"on-publish","src-delete-after":10,"src-prefetch-count":7,"reconnect-delay":0.5,"add-forward-headers":true,"dest-add-timestamp-header":true,"dest-publish-properties":{"delivery_mode":2}}`,
			check: func(t *testing.T, d Def) {
				require.Equal(t, []string{"amqp://a", "amqp://b"}, d.SrcURIs)
				require.Equal(t, "k.#", d.SrcExchangeKey)
				require.True(t, d.HasDestKey)
				require.Equal(t, "z", d.DestKey)
				require.Equal(t, OnPublish, d.AckMode)
				require.Equal(t, int64(10), d.DeleteCount)
				require.Equal(t, "", d.DeleteAfter)
				require.Equal(t, 7, d.Prefetch)
				require.Equal(t, 500*time.Millisecond, d.ReconnectDelay)
				require.True(t, d.AddForwardHeaders && d.AddTimestamp)
			}},
		{name: "queue-length", in: `{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","src-delete-after":"queue-length"}`,
			check: func(t *testing.T, d Def) { require.Equal(t, QueueLength, d.DeleteAfter) }},
		{name: "consumer args", in: `{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","src-consumer-args":{"x-stream-offset":"first","x-priority":5,"x-credit":{"n":1.5}}}`,
			check: func(t *testing.T, d Def) {
				require.Equal(t, map[string]any{"x-stream-offset": "first", "x-priority": int64(5), "x-credit": map[string]any{"n": 1.5}}, d.SrcConsumerArgs)
			}},
		{name: "no source", in: `{"src-uri":"amqp://","dest-uri":"amqp://"}`, err: "Must specify 'src-exchange' or 'src-queue'"},
		{name: "two sources", in: `{"src-uri":"amqp://","src-queue":"a","src-exchange":"x","dest-uri":"amqp://"}`, err: "Cannot specify 'src-exchange' and 'src-queue'"},
		{name: "two dests", in: `{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","dest-queue":"a","dest-exchange":"x"}`, err: "Cannot specify 'dest-exchange' and 'dest-queue'"},
		{name: "no-ack count", in: `{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","ack-mode":"no-ack","src-delete-after":3}`, err: "Cannot specify 'no-ack' and numerical 'delete-after'"},
		{name: "bad ack", in: `{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","ack-mode":"sometimes"}`, err: `ack-mode should be one of`},
		{name: "bad delete", in: `{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","src-delete-after":"soon"}`, err: `src-delete-after should be a number greater than or equal to 0, "never" or "queue-length"`},
		{name: "missing dest-uri", in: `{"src-uri":"amqp://","src-queue":"a"}`, err: `Key "dest-uri" not found`},
		{name: "bad uri", in: `{"src-uri":"http://x","src-queue":"a","dest-uri":"amqp://"}`, err: "not a valid URI"},
		{name: "empty uri list", in: `{"src-uri":[],"src-queue":"a","dest-uri":"amqp://"}`, err: "non-empty list"},
		{name: "other protocol", in: `{"src-protocol":"amqp10","src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://"}`, err: "only amqp091"},
		{name: "unknown key", in: `{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","colour":"red"}`, err: "Unrecognised terms"},
		{name: "prefetch zero", in: `{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","src-prefetch-count":0}`, err: "src-prefetch-count should be an integer"},
		{name: "not object", in: `[1]`, err: "JSON object"},
		{name: "verify", in: `{"src-uri":"amqps://h?verify=maybe","src-queue":"a","dest-uri":"amqp://"}`, err: "verify must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse([]byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			tc.check(t, d)
		})
	}
}

func TestParseURI(t *testing.T) {
	e, err := ParseURI("amqp://")
	require.NoError(t, err)
	require.True(t, e.Local)
	require.Equal(t, "/", e.VHost)
	e, err = ParseURI("amqp:///tenant%2Fa")
	require.NoError(t, err)
	require.True(t, e.Local)
	require.Equal(t, "tenant/a", e.VHost)
	e, err = ParseURI("amqps://u:p@h:5671/v?verify=verify_none&server_name_indication=other&heartbeat=10")
	require.NoError(t, err)
	require.False(t, e.Local)
	require.True(t, e.TLS.InsecureSkipVerify)
	require.Equal(t, "other", e.TLS.ServerName)
	require.Equal(t, "amqps://u:p@h:5671/v?heartbeat=10", e.URL)
	_, err = ParseURI("amqps://h?cacertfile=/nonexistent")
	require.ErrorContains(t, err, "cacertfile")
	_, err = ParseURI("amqps://h?certfile=/a")
	require.ErrorContains(t, err, "go together")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://h/v","dest-queue":"b"}`))
	f.Add([]byte(`{"src-uri":["amqps://h?verify=verify_none"],"src-exchange":"x","dest-uri":"amqp://","src-delete-after":5,"reconnect-delay":1e308}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Parse(in)
		if err != nil {
			return
		}
		// An accepted definition is one a Worker can run.
		if len(d.SrcURIs) == 0 || len(d.DestURIs) == 0 || d.Prefetch < 1 || d.ReconnectDelay < 0 {
			t.Fatalf("accepted an unrunnable definition: %+v", d)
		}
		if (d.SrcQueue == "") == (d.SrcExchange == "") && !(d.SrcQueue == "" && d.SrcExchange == "") {
			t.Fatalf("two sources accepted: %+v", d)
		}
	})
}
