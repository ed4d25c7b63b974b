package console_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestConsoleFeaturesInBrowser: the queues page's Features column shows a
// queue's properties and the abbreviations of its arguments that the
// argument table gives (args.js), as RabbitMQ's management UI does.
func TestConsoleFeaturesInBrowser(t *testing.T) {
	b, srv := serveConsole(t, broker.Options{Users: []broker.User{
		{Name: "admin", Password: "s3cret", Tags: []string{"administrator"}},
	}})
	conn := amqptest.Dial(t, "amqp://admin:s3cret@127.0.0.1:5672/", amqp091.Config{Dial: b.Dial})
	ch := amqptest.Channel(t, conn)
	_, err := ch.QueueDeclare("capped", true, false, false, false, amqp091.Table{"x-max-length": int32(5), "x-dead-letter-exchange": "dlx"})
	require.NoError(t, err)
	ctx := browser(t, 1280, 800)
	row := tid("queue-row")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL()+"/"),
		login("admin", "s3cret"),
		chromedp.Click(tid("nav-queues")),
		waitText(row, "capped"),
		waitText(row, "DLX"),
		waitText(row, "Lim"),
	))
}
