package vhost

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type nopReceiver struct{}

func (nopReceiver) DeliverReply(string, []byte, []byte) bool { return true }

func TestIsReplyName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"amq.rabbitmq.reply-to", false},
		{"amq.rabbitmq.reply-to.", false},
		{"amq.rabbitmq.reply-to.x", true},
		{"amq.rabbitmq.reply-tox", false},
		{"work", false},
	} {
		require.Equal(t, tc.want, IsReplyName(tc.name), tc.name)
	}
}

// TestReplyReceivers: names are unique and unguessable in shape, found
// while registered and gone once removed.
func TestReplyReceivers(t *testing.T) {
	v := &VHost{}
	a, b := v.AddReplyReceiver(nopReceiver{}), v.AddReplyReceiver(nopReceiver{})
	require.NotEqual(t, a, b)
	for _, name := range []string{a, b} {
		require.True(t, IsReplyName(name), name)
		require.Len(t, name, len(ReplyPrefix)+22, "128 random bits")
		_, ok := v.ReplyReceiver(name)
		require.True(t, ok, name)
	}
	v.RemoveReplyReceiver(a)
	_, ok := v.ReplyReceiver(a)
	require.False(t, ok)
	_, ok = v.ReplyReceiver(b)
	require.True(t, ok)
	_, ok = v.ReplyReceiver(ReplyQueue)
	require.False(t, ok, "the pseudo-queue itself is nobody's name")
}
