package vhost

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/routing"
)

// TestNameAndArgumentLimits: whatever door a declaration comes through, a
// name longer than a short string, a name that is not UTF-8 or an argument
// table no frame could carry is refused with 406 and nothing is stored;
// the largest allowed ones are taken.
func TestNameAndArgumentLimits(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("q", MaxNameLen+1)
	maxName := strings.Repeat("q", MaxNameLen)
	bad := "bad\xff\xfename"
	bigArgs := amqp.Table{"x-big": strings.Repeat("a", DefaultMaxArgumentsSize)}
	for _, tc := range []struct {
		name string
		do   func(v *VHost) error
		ok   bool
	}{
		{"queue name at the limit", func(v *VHost) error {
			_, err := v.DeclareQueue(ctx, "c", &amqp.QueueDeclare{Queue: maxName, Durable: true})
			return err
		}, true},
		{"queue name one byte too long", func(v *VHost) error {
			_, err := v.DeclareQueue(ctx, "c", &amqp.QueueDeclare{Queue: long, Durable: true})
			return err
		}, false},
		{"queue name not UTF-8", func(v *VHost) error {
			_, err := v.DeclareQueue(ctx, "c", &amqp.QueueDeclare{Queue: bad})
			return err
		}, false},
		{"queue arguments too big", func(v *VHost) error {
			_, err := v.DeclareQueue(ctx, "c", &amqp.QueueDeclare{Queue: "q", Arguments: bigArgs})
			return err
		}, false},
		{"exchange name at the limit", func(v *VHost) error {
			return v.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: maxName, Type: "direct"})
		}, true},
		{"exchange name too long", func(v *VHost) error {
			return v.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: long, Type: "direct"})
		}, false},
		{"exchange name not UTF-8", func(v *VHost) error {
			return v.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: bad, Type: "direct"})
		}, false},
		{"exchange arguments too big", func(v *VHost) error {
			return v.DeclareExchange(ctx, &amqp.ExchangeDeclare{Exchange: "x", Type: "direct", Arguments: bigArgs})
		}, false},
		{"binding key too long", func(v *VHost) error {
			return v.Bind(ctx, "c", routing.Binding{Source: "amq.direct", Destination: routing.Destination{Name: "dst"}, Key: long})
		}, false},
		{"binding key not UTF-8", func(v *VHost) error {
			return v.Bind(ctx, "c", routing.Binding{Source: "amq.direct", Destination: routing.Destination{Name: "dst"}, Key: bad})
		}, false},
		{"binding arguments too big", func(v *VHost) error {
			return v.Bind(ctx, "c", routing.Binding{Source: "amq.direct", Destination: routing.Destination{Name: "dst"}, Key: "k", Args: bigArgs})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			declareQueue(t, f.v, "c", amqp.QueueDeclare{Queue: "dst"})
			before := len(f.v.Queues())
			binds := len(f.v.Bindings())
			err := tc.do(f.v)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			amqptest.RequireCode(t, err, amqp.PreconditionFailed)
			require.Len(t, f.v.Queues(), before)
			require.Len(t, f.v.Bindings(), binds)
			qs, err := f.store.ListQueues(ctx, "/")
			require.NoError(t, err)
			require.Len(t, qs, before, "nothing stored")
		})
	}
}

// TestArgumentsSizeFollowsFrameMax: the bound grows with the frame_max the
// broker negotiates, and never goes below what the spec's minimum frame
// carries.
func TestArgumentsSizeFollowsFrameMax(t *testing.T) {
	require.Equal(t, DefaultMaxArgumentsSize, ArgumentsSizeFor(131072))
	require.Greater(t, ArgumentsSizeFor(1<<20), DefaultMaxArgumentsSize)
	require.Equal(t, ArgumentsSizeFor(amqp.FrameMinSize), ArgumentsSizeFor(0))
}
