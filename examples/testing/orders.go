package orders

import (
	"context"
	"encoding/json"
	"fmt"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Queue is where orders wait for the warehouse.
const Queue = "orders"

// Channel is what this package needs from an AMQP channel.
type Channel interface {
	QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error)
	PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error
	Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error)
}

// Order is one customer order.
type Order struct {
	ID       string `json:"id"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// Declare declares the orders queue (durable: orders survive a restart).
func Declare(ch Channel) error {
	_, err := ch.QueueDeclare(Queue, true, false, false, false, nil)
	return err
}

// Submit queues an order as a persistent JSON message.
func Submit(ctx context.Context, ch Channel, o Order) error {
	if o.Quantity <= 0 {
		return fmt.Errorf("orders: order %s: quantity %d", o.ID, o.Quantity)
	}
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return ch.PublishWithContext(ctx, "", Queue, false, false, amqp091.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp091.Persistent,
		MessageId:    o.ID,
		Body:         body,
	})
}

// Handle consumes orders and calls fn for each; an order fn fails is
// requeued. It returns when ctx ends or the channel closes.
func Handle(ctx context.Context, ch Channel, fn func(Order) error) error {
	msgs, err := ch.Consume(Queue, "warehouse", false, false, false, false, nil)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d, ok := <-msgs:
			if !ok {
				return nil
			}
			var o Order
			if err := json.Unmarshal(d.Body, &o); err != nil {
				_ = d.Reject(false) // malformed: never deliverable
				continue
			}
			if err := fn(o); err != nil {
				_ = d.Nack(false, true)
				continue
			}
			if err := d.Ack(false); err != nil {
				return err
			}
		}
	}
}
