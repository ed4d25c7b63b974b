package session

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

func TestCredentials(t *testing.T) {
	cases := []struct {
		name      string
		mechanism string
		response  string
		user      string
		password  string
		code      uint16 // 0: success
	}{
		{name: "PLAIN", mechanism: "PLAIN", response: "\x00guest\x00secret", user: "guest", password: "secret"},
		{name: "PLAIN empty password", mechanism: "PLAIN", response: "\x00guest\x00", user: "guest"},
		{name: "PLAIN authzid equal to user", mechanism: "PLAIN", response: "guest\x00guest\x00pw", user: "guest", password: "pw"},
		{name: "PLAIN authzid of someone else", mechanism: "PLAIN", response: "admin\x00guest\x00pw", code: amqp.AccessRefused},
		{name: "PLAIN no separators", mechanism: "PLAIN", response: "guest", code: amqp.SyntaxError},
		{name: "PLAIN one separator", mechanism: "PLAIN", response: "\x00guest", code: amqp.SyntaxError},
		{name: "PLAIN extra separator", mechanism: "PLAIN", response: "\x00guest\x00pw\x00x", code: amqp.SyntaxError},
		{name: "AMQPLAIN", mechanism: "AMQPLAIN", response: amqplain(t, "guest", "secret"), user: "guest", password: "secret"},
		{name: "AMQPLAIN truncated", mechanism: "AMQPLAIN", response: amqplain(t, "guest", "secret")[:10], code: amqp.SyntaxError},
		{name: "AMQPLAIN missing password", mechanism: "AMQPLAIN", response: amqplainTable(t, amqp.Table{"LOGIN": "guest"}), code: amqp.SyntaxError},
		{name: "AMQPLAIN wrong type", mechanism: "AMQPLAIN", response: amqplainTable(t, amqp.Table{"LOGIN": "guest", "PASSWORD": int32(1)}), code: amqp.SyntaxError},
		{name: "AMQPLAIN bytes values", mechanism: "AMQPLAIN", response: amqplainTable(t, amqp.Table{"LOGIN": []byte("guest"), "PASSWORD": []byte("pw")}), user: "guest", password: "pw"},
		{name: "unknown mechanism", mechanism: "EXTERNAL", code: amqp.CommandInvalid},
		{name: "mechanism names are case-sensitive", mechanism: "plain", response: "\x00guest\x00guest", code: amqp.CommandInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			user, password, err := credentials(tc.mechanism, tc.response)
			if tc.code != 0 {
				require.NotNil(t, err)
				require.Equal(t, tc.code, err.Code, err.Text)
				require.Equal(t, amqp.ClassConnection, err.ClassID)
				require.Equal(t, amqp.MethodConnectionStartOk, err.MethodID)
				return
			}
			require.Nil(t, err)
			require.Equal(t, tc.user, user)
			require.Equal(t, tc.password, password)
		})
	}
}

func amqplainTable(t *testing.T, tbl amqp.Table) string {
	t.Helper()
	b, err := amqp.AppendTable(nil, tbl)
	require.NoError(t, err)
	return string(b[4:])
}

func FuzzCredentials(f *testing.F) {
	f.Add("PLAIN", "\x00guest\x00guest")
	f.Add("AMQPLAIN", "\x05LOGINS\x00\x00\x00\x05guest\x08PASSWORDS\x00\x00\x00\x05guest")
	f.Fuzz(func(t *testing.T, mechanism, response string) {
		// Never panics; errors carry a reply code.
		_, _, err := credentials(mechanism, response)
		if err != nil && err.Code == 0 {
			t.Fatalf("error without a code: %v", err)
		}
	})
}

// TestLogName: names up to 255 bytes are logged as they are; longer ones
// are cut at a UTF-8 boundary and marked with their full length.
func TestLogName(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short", "guest", "guest"},
		{"255 bytes", strings.Repeat("a", 255), strings.Repeat("a", 255)},
		{"256 bytes", strings.Repeat("a", 256), strings.Repeat("a", 255) + "...(truncated, 256 bytes)"},
		{"cut before a split rune", strings.Repeat("a", 254) + "é" + "bb", strings.Repeat("a", 254) + "...(truncated, 258 bytes)"},
		{"120 KB", strings.Repeat("x", 120<<10), strings.Repeat("x", 255) + "...(truncated, 122880 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, LogName(tc.in))
		})
	}
}
