package amqpconv

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// TestTableRoundTrip: a table converted for the broker, encoded as a
// delivery's headers, decoded and converted back is what went in.
func TestTableRoundTrip(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	tests := []struct {
		name string
		in   amqp091.Table
	}{
		{"nil", nil},
		{"empty", amqp091.Table{}},
		{"scalars", amqp091.Table{
			"bool": true, "int8": int8(-1), "byte": byte(2), "int16": int16(-3), "uint16": uint16(4),
			"int32": int32(-5), "uint32": uint32(6), "int64": int64(-7), "float32": float32(1.5),
			"float64": 2.25, "string": "s", "bytes": []byte{1}, "time": ts, "void": nil,
			"decimal": amqp091.Decimal{Scale: 2, Value: 314},
		}},
		{"nested", amqp091.Table{
			"table": amqp091.Table{"inner": amqp091.Table{"deep": "x"}},
			"array": []any{int32(1), amqp091.Table{"k": "v"}, []any{"nested", amqp091.Decimal{Value: 1}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.in.Validate())
			converted := ToTable(tt.in)
			require.NoError(t, converted.Validate(), "the broker can encode it")
			// Through the wire encoding and back, as a delivery's headers.
			p := amqp.Properties{Headers: converted}
			decoded, err := amqp.DecodeProperties(p.Append(nil))
			require.NoError(t, err)
			got := FromTable(decoded.Headers)
			if len(tt.in) == 0 {
				require.Nil(t, got, "empty headers are not sent")
				return
			}
			require.Equal(t, tt.in, got)
		})
	}
}

// TestPropertiesRoundTrip: every property of a publishing survives the
// broker's encoding and comes back, in a Publishing, a Delivery and a
// Return, as amqp091-go would decode it from the wire.
func TestPropertiesRoundTrip(t *testing.T) {
	ts := time.Unix(1_700_000_000, 0)
	in := amqp091.Publishing{
		Headers: amqp091.Table{"n": int32(7), "at": ts}, ContentType: "text/plain", ContentEncoding: "gzip",
		DeliveryMode: 2, Priority: 3, CorrelationId: "corr", ReplyTo: "rq", Expiration: "60000",
		MessageId: "id", Timestamp: ts, Type: "t", UserId: "guest", AppId: "app",
	}
	p := Properties(&in)
	decoded, err := amqp.DecodeProperties(p.Append(nil))
	require.NoError(t, err)

	pub := Publishing(&decoded)
	require.Equal(t, ts.UTC(), pub.Timestamp, "Publishing keeps the decoded (UTC) timestamp")
	pub.Timestamp = ts
	require.Equal(t, in, pub)

	d := Delivery(&decoded)
	require.Equal(t, in, DeliveryPublishing(&d), "Delivery carries every property, the timestamp local")

	r := Return(&decoded)
	require.Equal(t, in, amqp091.Publishing{
		Headers: r.Headers, ContentType: r.ContentType, ContentEncoding: r.ContentEncoding,
		DeliveryMode: r.DeliveryMode, Priority: r.Priority, CorrelationId: r.CorrelationId,
		ReplyTo: r.ReplyTo, Expiration: r.Expiration, MessageId: r.MessageId,
		Timestamp: r.Timestamp, Type: r.Type, UserId: r.UserId, AppId: r.AppId,
	}, "Return carries every property, the timestamp local")

	require.True(t, LocalTime(time.Time{}).IsZero(), "no timestamp stays none")
}
