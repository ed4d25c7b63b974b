package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer) error {
	b, err := broker.New(broker.Options{}) // in memory; DataDir: "path" persists
	if err != nil {
		return err
	}
	defer b.Close()

	ch, err := b.Channel(ctx) // the method set of *amqp091.Channel
	if err != nil {
		return err
	}
	defer ch.Close()

	if _, err := ch.QueueDeclare("greetings", false, false, false, false, nil); err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 3))
	for _, who := range []string{"Ada", "Grace", "Edsger"} {
		msg := amqp091.Publishing{ContentType: "text/plain", Body: []byte("hello, " + who)}
		if err := ch.PublishWithContext(ctx, "", "greetings", false, false, msg); err != nil {
			return err
		}
	}
	for range 3 {
		if c := <-confirms; !c.Ack {
			return fmt.Errorf("publish %d was not stored", c.DeliveryTag)
		}
	}

	msgs, err := ch.Consume("greetings", "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	for range 3 {
		d := <-msgs
		fmt.Fprintf(out, "%s (delivery %d)\n", d.Body, d.DeliveryTag)
		if err := d.Ack(false); err != nil {
			return err
		}
	}
	return nil
}
