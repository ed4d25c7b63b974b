package broker_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestPublishUserIDMustBeTheUsers: a publish whose user_id property names
// another user than the connection's closes the channel with 406, in
// RabbitMQ's words, and nothing is enqueued, unless the user has the
// impersonator tag (rabbit_channel's check_user_id_header); the
// embedder's own unrestricted channel may set any user_id.
func TestPublishUserIDMustBeTheUsers(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, broker.Options{})
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "alice", Password: "pw"}))
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "imp", Password: "pw", Tags: []string{"impersonator"}}))
	for _, u := range []string{"alice", "imp"} {
		require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn(u, "/")))
	}
	setupCh := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, setupCh, "uid", false)

	type publisher interface {
		PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error
		NotifyClose(c chan *amqp091.Error) chan *amqp091.Error
	}
	tcp := func(user string) publisher {
		return amqptest.Channel(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), user, "pw"), amqp091.Config{}))
	}
	for _, tc := range []struct {
		name   string
		ch     func() publisher
		userID string
		refuse string // the expected reply text; "" when accepted
	}{
		{"own name", func() publisher { return tcp("alice") }, "alice", ""},
		{"no user_id", func() publisher { return tcp("alice") }, "", ""},
		{"another user's name", func() publisher { return tcp("alice") }, "bob",
			"PRECONDITION_FAILED - user_id property set to 'bob' but authenticated user was 'alice'"},
		{"impersonator", func() publisher { return tcp("imp") }, "alice", ""},
		{"embedder's unrestricted channel", func() publisher {
			ch, err := b.Channel(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = ch.Close() })
			return ch
		}, "anyone", ""},
		{"direct channel as a user", func() publisher {
			ch, err := b.Channel(ctx, broker.AsUser("alice"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = ch.Close() })
			return ch
		}, "bob", "PRECONDITION_FAILED - user_id property set to 'bob' but authenticated user was 'alice'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := setupCh.QueuePurge("uid", false)
			require.NoError(t, err)
			ch := tc.ch()
			closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
			err = ch.PublishWithContext(ctx, "", "uid", false, false,
				amqp091.Publishing{Body: []byte("x"), UserId: tc.userID})
			if tc.refuse != "" {
				// The direct Channel answers the publish itself; over a
				// socket the refusal arrives as the channel's close.
				if err == nil {
					err = amqptest.AwaitClose(t, closed)
				}
				amqptest.RequireReply(t, err, amqp091.PreconditionFailed, tc.refuse)
				require.EqualValues(t, 0, queueStats(t, b, "uid").Ready, "nothing was enqueued")
				return
			}
			require.NoError(t, err)
			waitStats(t, b, "uid", func(s queueCounts) bool { return s.Ready == 1 })
			d := amqptest.Get(t, setupCh, "uid", true)
			require.Equal(t, tc.userID, d.UserId)
		})
	}
}
