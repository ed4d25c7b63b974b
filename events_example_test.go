package broker_test

import (
	"context"
	"fmt"
	"log"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
)

// A service watching what goes wrong with its messages: a publish that
// reached no queue, and a job its worker rejected. The subscription lasts
// as long as ctx.
func ExampleBroker_Events() {
	b, err := broker.New(broker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := b.Events(ctx, 64, broker.MessageReturned, broker.MessageDeadLettered)

	ch, err := b.Channel(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := ch.QueueDeclare("jobs", true, false, false, false, nil); err != nil {
		log.Fatal(err)
	}
	// Mandatory, to a queue nobody declared: returned.
	if err := ch.PublishWithContext(ctx, "", "nowhere", true, false, amqp091.Publishing{MessageId: "job-1"}); err != nil {
		log.Fatal(err)
	}
	// Rejected by its worker, on a queue without a dead-letter exchange.
	if err := ch.PublishWithContext(ctx, "", "jobs", false, false, amqp091.Publishing{MessageId: "job-2"}); err != nil {
		log.Fatal(err)
	}
	jobs, err := ch.Consume("jobs", "worker", false, false, false, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := (<-jobs).Reject(false); err != nil {
		log.Fatal(err)
	}

	for range 2 {
		e := <-events
		switch e.Kind {
		case broker.MessageReturned:
			fmt.Println(e.Kind, e.MessageID, "to", e.RoutingKey+":", e.Code, e.Reason)
		case broker.MessageDeadLettered:
			fmt.Println(e.Kind, e.MessageID, "in", e.Queue+":", e.Reason, "discarded:", e.Discarded)
		}
	}
	// Output:
	// message.returned job-1 to nowhere: 312 NO_ROUTE
	// message.dead_lettered job-2 in jobs: rejected discarded: true
}
