package amqp

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func allProperties() Properties {
	return Properties{
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		Headers:         Table{"x-match": "all", "n": int32(3)},
		DeliveryMode:    2,
		Priority:        9,
		CorrelationID:   "corr",
		ReplyTo:         "amq.rabbitmq.reply-to",
		Expiration:      "60000",
		MessageID:       "msg-1",
		Timestamp:       time.Unix(1700000000, 0).UTC(),
		Type:            "order.created",
		UserID:          "guest",
		AppID:           "warren-test",
		ClusterID:       "cluster",
	}
}

func TestPropertiesRoundTrip(t *testing.T) {
	all := allProperties()
	cases := []struct {
		name string
		p    Properties
		flag uint16
	}{
		{"none", Properties{}, 0},
		{"ContentType", Properties{ContentType: all.ContentType}, flagContentType},
		{"ContentEncoding", Properties{ContentEncoding: all.ContentEncoding}, flagContentEncoding},
		{"Headers", Properties{Headers: all.Headers}, flagHeaders},
		{"DeliveryMode", Properties{DeliveryMode: all.DeliveryMode}, flagDeliveryMode},
		{"Priority", Properties{Priority: all.Priority}, flagPriority},
		{"CorrelationID", Properties{CorrelationID: all.CorrelationID}, flagCorrelationID},
		{"ReplyTo", Properties{ReplyTo: all.ReplyTo}, flagReplyTo},
		{"Expiration", Properties{Expiration: all.Expiration}, flagExpiration},
		{"MessageID", Properties{MessageID: all.MessageID}, flagMessageID},
		{"Timestamp", Properties{Timestamp: all.Timestamp}, flagTimestamp},
		{"Type", Properties{Type: all.Type}, flagType},
		{"UserID", Properties{UserID: all.UserID}, flagUserID},
		{"AppID", Properties{AppID: all.AppID}, flagAppID},
		{"ClusterID", Properties{ClusterID: all.ClusterID}, flagClusterID},
		{"all", all, 0xfffc},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.p.Append(nil)
			require.Equal(t, tc.flag, uint16(raw[0])<<8|uint16(raw[1]), "flags")
			got, err := DecodeProperties(raw)
			require.NoError(t, err)
			require.Equal(t, tc.p, got)

			sum, err := SummarizeProperties(raw)
			require.NoError(t, err)
			require.Equal(t, PropertySummary{
				DeliveryMode: tc.p.DeliveryMode,
				Priority:     tc.p.Priority,
				Expiration:   tc.p.Expiration,
				HasHeaders:   len(tc.p.Headers) > 0,
				UserID:       tc.p.UserID,
			}, sum)

			// In a header frame.
			frame := AppendHeaderFrame(nil, 3, ClassBasic, 1<<33, raw)
			f, err := NewFrameReader(strings.NewReader(string(frame))).ReadFrame()
			require.NoError(t, err)
			require.Equal(t, FrameHeader, f.Type)
			h, err := ParseContentHeader(f.Payload)
			require.NoError(t, err)
			require.Equal(t, ContentHeader{ClassID: ClassBasic, BodySize: 1 << 33, Properties: raw}, h)

			// Every proper prefix is malformed.
			for n := 0; n < len(raw); n++ {
				_, err := DecodeProperties(raw[:n])
				requireCode(t, SyntaxError, err)
				_, err = SummarizeProperties(raw[:n])
				requireCode(t, SyntaxError, err)
			}
			_, err = DecodeProperties(append(raw, 0))
			requireCode(t, SyntaxError, err)
		})
	}
}

func requireCode(t *testing.T, code uint16, err error) {
	t.Helper()
	var e *Error
	require.True(t, errors.As(err, &e), "want *Error %d, got %v", code, err)
	require.Equal(t, code, e.Code, e.Text)
}

func TestPropertiesFixture(t *testing.T) {
	// content-type "t", delivery-mode 2, timestamp 1, cluster-id "c".
	raw := []byte{
		0x90, 0x44, // flags: content-type, delivery-mode, timestamp, cluster-id
		1, 't',
		2,
		0, 0, 0, 0, 0, 0, 0, 1,
		1, 'c',
	}
	p := Properties{ContentType: "t", DeliveryMode: 2, Timestamp: time.Unix(1, 0).UTC(), ClusterID: "c"}
	require.Equal(t, raw, p.Append(nil))
	got, err := DecodeProperties(raw)
	require.NoError(t, err)
	require.Equal(t, p, got)
}

func TestPropertiesFlagWords(t *testing.T) {
	// An empty continuation word is accepted; a continuation naming properties is not.
	got, err := DecodeProperties([]byte{0x10, 0x01, 0x00, 0x00, 2})
	require.NoError(t, err)
	require.Equal(t, Properties{DeliveryMode: 2}, got)
	_, err = DecodeProperties([]byte{0x00, 0x01, 0x00, 0x01, 0x00, 0x00})
	require.NoError(t, err)
	_, err = DecodeProperties([]byte{0x00, 0x01, 0x80, 0x00})
	requireCode(t, SyntaxError, err)
	_, err = DecodeProperties([]byte{0x00, 0x01})
	requireCode(t, SyntaxError, err)
	// Bit 1 is no property of class basic, but reserved: ignored like RabbitMQ does.
	_, err = DecodeProperties([]byte{0x00, 0x02})
	require.NoError(t, err)
}

func TestPropertiesMalformedHeaders(t *testing.T) {
	raw := []byte{0x20, 0x00, 0, 0, 0, 3, 1, 'k', 'Z'}
	_, err := DecodeProperties(raw)
	requireCode(t, SyntaxError, err)
	_, err = SummarizeProperties(raw)
	requireCode(t, SyntaxError, err)
	_, err = ParseContentHeader(append([]byte{0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, raw...))
	requireCode(t, SyntaxError, err)
}

func TestParseContentHeaderTruncated(t *testing.T) {
	for n := range 14 {
		_, err := ParseContentHeader(make([]byte, n))
		requireCode(t, SyntaxError, err)
	}
	h, err := ParseContentHeader(make([]byte, 14))
	require.NoError(t, err)
	require.Equal(t, ContentHeader{Properties: []byte{0, 0}}, h)
}

func TestPropertiesLongStringsCut(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	got, err := DecodeProperties((&Properties{ContentType: long}).Append(nil))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("é", 127), got.ContentType, "cut at 254 bytes, a rune boundary")
}

func TestDecodePropertiesDoesNotAlias(t *testing.T) {
	p := allProperties()
	raw := p.Append(nil)
	got, err := DecodeProperties(raw)
	require.NoError(t, err)
	for i := range raw {
		raw[i] = 'X'
	}
	require.Equal(t, p, got)
}

func TestSetHeaders(t *testing.T) {
	withHeaders := Properties{ContentType: "text/plain", Headers: Table{"keep": "k", "x-delay": int32(5)}}
	raw := withHeaders.Append(nil)
	tests := []struct {
		name string
		raw  []byte
		set  Table
		want Table
	}{
		{"added to none", (&Properties{ContentType: "text/plain"}).Append(nil), Table{"x-delivery-count": int64(1)}, Table{"x-delivery-count": int64(1)}},
		{"replaced, others kept", raw, Table{"x-delay": int32(-5)}, Table{"keep": "k", "x-delay": int32(-5)}},
		{"several", raw, Table{"a": int64(1), "b": int64(2)}, Table{"keep": "k", "x-delay": int32(5), "a": int64(1), "b": int64(2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]byte(nil), tt.raw...)
			got, err := DecodeProperties(SetHeaders(tt.raw, tt.set))
			require.NoError(t, err)
			require.Equal(t, tt.want, got.Headers)
			require.Equal(t, "text/plain", got.ContentType)
			require.Equal(t, before, tt.raw, "raw must not be modified")
		})
	}
	t.Run("undecodable returned as is", func(t *testing.T) {
		bad := []byte{0xff}
		require.Equal(t, bad, SetHeaders(bad, Table{"a": int64(1)}))
	})
}
