package broker_test

import (
	"context"
	"fmt"
	"log"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
)

// The first door: a TCP listener any AMQP 0-9-1 client can use.
func Example_tcp() {
	b, err := broker.New(broker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Listen("127.0.0.1:0"); err != nil { // or ListenAndServe, Serve
		log.Fatal(err)
	}

	conn, err := amqp091.Dial(b.URL()) // amqp://guest:guest@127.0.0.1:<port>/
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(q.Name != "")
	// Output: true
}

// The second door: the same protocol through an in-memory connection, no
// port at all. Handy in tests (brokertest.Dial does exactly this).
func ExampleBroker_Dial() {
	b, err := broker.New(broker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	conn, err := amqp091.DialConfig(b.URL(), amqp091.Config{Dial: b.Dial})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := ch.QueueDeclare("jobs", false, false, false, false, nil); err != nil {
		log.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		log.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	err = ch.PublishWithContext(context.Background(), "", "jobs", false, false, amqp091.Publishing{Body: []byte("resize photo 7")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored:", (<-confirms).Ack)
	d, ok, err := ch.Get("jobs", true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ok, string(d.Body))
	// Output:
	// stored: true
	// true resize photo 7
}

// The third door: a direct channel, with amqp091-go's method set and
// types, served in-process by the same code as the other two.
func ExampleBroker_Channel() {
	b, err := broker.New(broker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	ch, err := b.Channel(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare("jobs", true, false, false, false, nil); err != nil {
		log.Fatal(err)
	}
	err = ch.PublishWithContext(ctx, "", "jobs", false, false, amqp091.Publishing{Body: []byte("hi")})
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := ch.Consume("jobs", "", false, false, false, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	d := <-msgs
	fmt.Println(string(d.Body), d.Redelivered)
	if err := d.Ack(false); err != nil {
		log.Fatal(err)
	}
	// Output: hi false
}

// A Channel opened AsUser acts for that user on the vhost OnVHost names,
// with the user's permissions: here alice may configure only names
// starting "alice-".
func ExampleAsUser() {
	b, err := broker.New(broker.Options{VHosts: []string{"/", "orders"}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if err := b.Admin().PutUser(ctx, broker.User{Name: "alice", Password: "secret"}); err != nil {
		log.Fatal(err)
	}
	perm := broker.Permission{User: "alice", VHost: "orders", Configure: "^alice-", Write: ".*", Read: ".*"}
	if err := b.Admin().PutPermission(ctx, perm); err != nil {
		log.Fatal(err)
	}

	ch, err := b.Channel(ctx, broker.AsUser("alice"), broker.OnVHost("orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	_, err = ch.QueueDeclare("alice-jobs", false, false, false, false, nil)
	fmt.Println(err)
	_, err = ch.QueueDeclare("jobs", false, false, false, false, nil)
	fmt.Println(err)

	_, err = b.Channel(ctx, broker.AsUser("alice")) // no permissions on "/"
	fmt.Println(err)
	// Output:
	// <nil>
	// Exception (403) Reason: "ACCESS_REFUSED - access to queue 'jobs' in vhost 'orders' refused for user 'alice'"
	// Exception (530) Reason: "NOT_ALLOWED - access to vhost '/' refused for user 'alice'"
}

// Errors are *amqp091.Error with the code a RabbitMQ client would get, and
// close the channel as they do on the wire.
func ExampleChannel_errors() {
	b, err := broker.New(broker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ch, err := b.Channel(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))

	_, err = ch.QueueDeclarePassive("missing", false, false, false, false, nil)
	fmt.Println(err)
	fmt.Println((<-closed).Code, ch.IsClosed())
	// Output:
	// Exception (404) Reason: "NOT_FOUND - no queue 'missing' in vhost '/'"
	// 404 true
}

// Delivery.Nack with requeue puts the message back in its place; the next
// delivery is flagged as redelivered.
func ExampleChannel_Nack() {
	b, err := broker.New(broker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	ch, err := b.Channel(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare("work", false, false, false, false, nil); err != nil {
		log.Fatal(err)
	}
	for _, body := range []string{"first", "second"} {
		if err := ch.PublishWithContext(ctx, "", "work", false, false, amqp091.Publishing{Body: []byte(body)}); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		d, _, err := ch.Get("work", false)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(d.Body), d.Redelivered)
		if d.Redelivered || string(d.Body) == "second" {
			err = d.Ack(false)
		} else {
			err = d.Nack(false, true)
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// first false
	// first true
	// second false
}

// Flow control: while a resource alarm is in effect, a connection that
// publishes is blocked (its publish is held, not lost) and told so; it is
// unblocked once the alarm clears. Tests raise alarms by hand.
func ExampleBroker_RaiseAlarm() {
	b, err := broker.New(broker.Options{MemoryHighWatermark: 64 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	conn, err := amqp091.DialConfig(b.URL(), amqp091.Config{Dial: b.Dial})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 2))
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := ch.QueueDeclare("jobs", false, false, false, false, nil); err != nil {
		log.Fatal(err)
	}

	b.RaiseAlarm(broker.AlarmMemory)
	fmt.Println("alarms:", b.Alarms())
	err = ch.PublishWithContext(context.Background(), "", "jobs", false, false, amqp091.Publishing{Body: []byte("job 1")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", <-blocked)

	b.ClearAlarm(broker.AlarmMemory)
	fmt.Printf("%+v\n", <-blocked)
	if err := b.WaitIdle(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready:", b.Stats().Ready)
	// Output:
	// alarms: [memory]
	// {Active:true Reason:low on memory}
	// {Active:false Reason:}
	// ready: 1
}
