package broker_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
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
