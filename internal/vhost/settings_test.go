package vhost

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// TestDefaultQueueType: on a vhost with a default queue type, a durable,
// non-exclusive, non-auto-delete queue declared without x-queue-type gets
// the default written into its arguments (RabbitMQ's
// augment_declare_args), so redeclaring it without x-queue-type is
// equivalent and naming another type is not; other queues keep no type.
func TestDefaultQueueType(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	v := f.v
	declare := func(name string, durable, exclusive, autoDelete bool, args amqp.Table) (*Queue, error) {
		return v.DeclareQueue(ctx, "conn", &amqp.QueueDeclare{Queue: name, Durable: durable, Exclusive: exclusive,
			AutoDelete: autoDelete, Arguments: args})
	}
	_, err := declare("before", true, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, "", v.DefaultQueueType())
	v.SetDefaultQueueType("quorum")
	require.Equal(t, "quorum", v.DefaultQueueType())

	for _, tc := range []struct {
		name                           string
		durable, exclusive, autoDelete bool
		args                           amqp.Table
		want                           any // x-queue-type stored, nil for none
	}{
		{"durable", true, false, false, nil, "quorum"},
		{"durable with other args", true, false, false, amqp.Table{"x-max-length": int32(5)}, "quorum"},
		{"named classic", true, false, false, amqp.Table{"x-queue-type": "classic"}, "classic"},
		{"transient", false, false, false, nil, nil},
		{"exclusive", true, true, false, nil, nil},
		{"auto-delete", true, false, true, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			q, err := declare(tc.name, tc.durable, tc.exclusive, tc.autoDelete, args)
			require.NoError(t, err)
			got, ok := q.Args["x-queue-type"]
			if tc.want == nil {
				require.False(t, ok, "x-queue-type %v", got)
			} else {
				require.Equal(t, tc.want, got)
			}
			if tc.args != nil && tc.want == "quorum" {
				require.NotContains(t, tc.args, "x-queue-type", "the caller's table is left alone")
			}
			// Redeclaring as first declared is equivalent.
			_, err = declare(tc.name, tc.durable, tc.exclusive, tc.autoDelete, args)
			require.NoError(t, err)
		})
	}

	// The default written into a queue's arguments makes a redeclare that
	// names the default equivalent, and one naming classic not.
	_, err = declare("durable", true, false, false, amqp.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)
	_, err = declare("durable", true, false, false, amqp.Table{"x-queue-type": "classic"})
	requireCode(t, err, amqp.PreconditionFailed, "inequivalent arg 'x-queue-type' for queue 'durable' in vhost '/': received 'classic' but current is 'quorum'")
	// A queue declared before the default was set has no type: a declare
	// without one now means the default, which it is not (as in RabbitMQ).
	_, err = declare("before", true, false, false, nil)
	requireCode(t, err, amqp.PreconditionFailed, "inequivalent arg 'x-queue-type' for queue 'before' in vhost '/': received the value 'quorum' of type 'longstr' but current is none")
	_, err = declare("before", true, false, false, amqp.Table{"x-queue-type": "classic"})
	require.NoError(t, err)

	v.SetDefaultQueueType("")
	q, err := declare("after", true, false, false, nil)
	require.NoError(t, err)
	require.NotContains(t, q.Args, "x-queue-type")
}

// TestQueueLimit: the max-queues limit set on an open vhost, as RabbitMQ's
// vhost limits count: 0 refuses every new queue, a negative one is no
// limit, and unsetting it brings Config.MaxQueues back. Redeclaring an
// existing queue is never refused.
func TestQueueLimit(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	v := f.v
	declare := func(name string) error {
		_, err := v.DeclareQueue(ctx, "conn", &amqp.QueueDeclare{Queue: name})
		return err
	}
	require.NoError(t, declare("q1"))
	v.SetQueueLimit(0, true)
	requireCode(t, declare("q2"), amqp.PreconditionFailed, "cannot declare queue 'q2': queue limit in vhost '/' (0) is reached")
	require.NoError(t, declare("q1"), "an existing queue")
	v.SetQueueLimit(2, true)
	require.NoError(t, declare("q2"))
	requireCode(t, declare("q3"), amqp.PreconditionFailed, "cannot declare queue 'q3': queue limit in vhost '/' (2) is reached")
	v.SetQueueLimit(-1, true)
	require.NoError(t, declare("q3"))
	v.cfg.MaxQueues = 3
	v.SetQueueLimit(0, false)
	requireCode(t, declare("q4"), amqp.PreconditionFailed, "cannot declare queue 'q4': queue limit in vhost '/' (3) is reached")
}

func requireCode(t *testing.T, err error, code uint16, text string) {
	t.Helper()
	var ae *amqp.Error
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, code, ae.Code)
	_, got, _ := strings.Cut(ae.Text, " - ") // after the reply code's name
	require.Equal(t, text, got)
}
