package broker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
)

// A service stopping: Shutdown waits for the worker to ack the job it
// holds, then closes the broker.
func ExampleBroker_Shutdown() {
	b, err := broker.New(broker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ch, err := b.Channel(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	if _, err := ch.QueueDeclare("work", true, false, false, false, nil); err != nil {
		log.Fatal(err)
	}
	if err := ch.PublishWithContext(context.Background(), "", "work", false, false, amqp091.Publishing{Body: []byte("job")}); err != nil {
		log.Fatal(err)
	}
	jobs, err := ch.Consume("work", "", false, false, false, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	job := <-jobs

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- b.Shutdown(ctx) // no new deliveries from here on
	}()
	fmt.Println("processed", string(job.Body))
	if err := job.Ack(false); err != nil {
		log.Fatal(err)
	}
	fmt.Println("shutdown:", <-done)
	// Output:
	// processed job
	// shutdown: <nil>
}
