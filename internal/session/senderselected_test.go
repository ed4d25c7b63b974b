package session

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/vhost"
)

// TestSenderSelectedRefusalNamesPublish: a CC header that is not an array
// closes the channel with 406, and the channel.close names basic.publish
// (class 60, method 40) like every other refusal of a publish.
func TestSenderSelectedRefusalNamesPublish(t *testing.T) {
	cfg := testConfig()
	vh := testVHost(t)
	cfg.VHost = func(name string) (*vhost.VHost, bool) { return vh, name == "/" }
	p := startPeer(t, cfg)
	p.Handshake()
	p.OpenChannel(1)
	props := (&amqp.Properties{Headers: amqp.Table{"CC": "q"}}).Append(nil)
	var out []byte
	out = amqp.AppendMethodFrame(out, 1, &amqp.BasicPublish{RoutingKey: "q"})
	out = amqp.AppendHeaderFrame(out, 1, amqp.ClassBasic, 1, props)
	out = amqp.AppendFrame(out, amqp.FrameBody, 1, []byte("x"))
	p.Send(out)
	cl, ok := p.ExpectMethod(1).(*amqp.ChannelClose)
	require.True(t, ok)
	require.Equal(t, amqp.PreconditionFailed, cl.ReplyCode)
	require.Equal(t, `PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"CC",longstr}`, cl.ReplyText)
	require.Equal(t, amqp.ClassBasic, cl.ClassId)
	require.Equal(t, (&amqp.BasicPublish{}).MethodID(), cl.MethodId)
}
