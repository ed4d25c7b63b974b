package broker_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/auth/oauth2/oauth2test"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestUpdateSecret refreshes a connection's secret through amqp091-go's
// UpdateSecret over TCP and over Broker.Dial: update-secret-ok whatever the
// new secret, as RabbitMQ 3.10 to 4.x answer it with their internal user
// database, and the connection carries on. A deleted user's connection is
// already closed (320) when it could ask, so UpdateSecret reports the
// close; the user's permissions go on applying after a refresh.
func TestUpdateSecret(t *testing.T) {
	amqptest.CheckGoroutines(t)
	ctx := context.Background()
	b := startBroker(t, broker.Options{})
	dials := map[string]func(t *testing.T, user string) *amqp091.Connection{
		"tcp": func(t *testing.T, user string) *amqp091.Connection {
			return amqptest.Dial(t, amqptest.UserURL(b.URL(), user, user), amqp091.Config{})
		},
		"Broker.Dial": func(t *testing.T, user string) *amqp091.Connection {
			return amqptest.DialVia(t, b.Dial, user, "update-secret")
		},
	}
	for via, dial := range dials {
		t.Run(via, func(t *testing.T) {
			user := "u-" + via
			require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: user, Password: user}))
			require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn(user, "/")))
			conn := dial(t, user)
			for _, secret := range []string{user, "a-new-token", ""} {
				require.NoError(t, conn.UpdateSecret(secret, "token refresh"))
				amqptest.RequireWorks(t, conn)
			}

			// Permissions still apply after a refresh: none on "/" now.
			require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: user, VHost: "/"}))
			require.NoError(t, conn.UpdateSecret("another-token", "token refresh"))
			ch := amqptest.Channel(t, conn)
			_, err := ch.QueueDeclare("q-"+via, false, true, false, false, nil)
			amqptest.RequireCode(t, err, amqp091.AccessRefused)

			errs := conn.NotifyClose(make(chan *amqp091.Error, 1))
			require.NoError(t, b.Admin().DeleteUser(ctx, user))
			amqptest.RequireReply(t, amqptest.AwaitClose(t, errs), amqp091.ConnectionForced, "CONNECTION_FORCED - user '"+user+"' is deleted")
			require.ErrorIs(t, conn.UpdateSecret("late-token", "token refresh"), amqp091.ErrClosed)
		})
	}
}

// TestUpdateSecretReplacesScopes: connection.update-secret with a new
// token swaps the identity that decides the connection's permissions and
// forgets the decisions the old one was allowed, as RabbitMQ 4.x does
// (rabbit_channel:update_user_state clears the channel's permission
// cache): a token refreshed without the write scope on exchange x has its
// next publish to x refused with 403, even though the first token's
// allowed publish to x was cached; a token refreshed with it may publish.
func TestUpdateSecretReplacesScopes(t *testing.T) {
	is := oauth2test.NewIssuer(t)
	b := oauth2Broker(t, is, nil)
	const (
		withWrite    = "rabbitmq.configure:*/* rabbitmq.read:*/* rabbitmq.write:%2F/x"
		withoutWrite = "rabbitmq.configure:*/* rabbitmq.read:*/*"
	)
	token := func(scopes string) string {
		return is.Sign(oauth2test.Claims("rabbitmq", "alice", scopes, time.Hour), "", false)
	}
	publish := func(ch *amqp091.Channel) error {
		if err := ch.Publish("x", "k", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
			return err
		}
		// A round trip on the channel: the publish was decided before it.
		return ch.ExchangeDeclarePassive("x", "fanout", false, false, false, false, nil)
	}
	// refused publishes on ch, which the broker must refuse, and returns
	// the channel.close it sent. The close, not publish's error, carries
	// the code: when the close arrives before the passive declare is sent,
	// amqp091-go answers that call with its own 504 (channel not open).
	refused := func(ch *amqp091.Channel) *amqp091.Error {
		closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
		require.Error(t, publish(ch))
		return amqptest.AwaitClose(t, closed)
	}

	t.Run("losing the scope", func(t *testing.T) {
		conn := amqptest.Dial(t, amqptest.UserURL(b.URL(), "ignored", token(withWrite)), amqp091.Config{})
		ch := amqptest.Channel(t, conn)
		require.NoError(t, ch.ExchangeDeclare("x", "fanout", false, false, false, false, nil))
		require.NoError(t, publish(ch))
		require.NoError(t, publish(ch)) // answered from the cache
		require.NoError(t, conn.UpdateSecret(token(withoutWrite), "refresh"))
		err := refused(ch)
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
		require.Contains(t, err.Error(), "access to exchange 'x' in vhost '/' refused for user 'alice'")
		amqptest.RequireWorks(t, conn) // the connection stays, as with any refusal
	})
	t.Run("gaining the scope", func(t *testing.T) {
		conn := amqptest.Dial(t, amqptest.UserURL(b.URL(), "ignored", token(withoutWrite)), amqp091.Config{})
		ch := amqptest.Channel(t, conn)
		require.NoError(t, ch.ExchangeDeclare("x", "fanout", false, false, false, false, nil))
		amqptest.RequireCode(t, refused(ch), amqp091.AccessRefused)
		require.NoError(t, conn.UpdateSecret(token(withWrite), "refresh"))
		require.NoError(t, publish(amqptest.Channel(t, conn)))
	})
}
