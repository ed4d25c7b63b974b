package broker_test

import (
	"context"
	"fmt"
	"log"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/clock"
)

// retryRig is the part the two retry recipes share: a broker on a fake
// clock (so the example shows minutes of backoff in milliseconds), and a
// deduplicating "work" exchange in front of the "jobs" queue, keyed by job
// id and attempt: a publisher that sends the same attempt twice (after a
// lost confirm, say) gets it processed once.
type retryRig struct {
	b   *broker.Broker
	clk *clock.Fake
	ch  *amqp091.Channel
}

func newRetryRig() *retryRig {
	clk := clock.NewFake(time.Unix(0, 0))
	b, err := broker.New(broker.Options{Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	conn, err := amqp091.DialConfig(b.URL(), amqp091.Config{Dial: b.Dial})
	if err != nil {
		log.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	must(ch.Confirm(false))
	must(ch.ExchangeDeclare("work", "x-message-deduplication", true, false, false, false,
		amqp091.Table{"x-cache-size": int32(100_000), "x-cache-ttl": int32(3_600_000)}))
	_, err = ch.QueueDeclare("jobs", true, false, false, false, nil)
	must(err)
	must(ch.QueueBind("jobs", "", "work", false, nil))
	return &retryRig{b: b, clk: clk, ch: ch}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// publish sends attempt n of job id to exchange with key, and headers
// besides the deduplication key; it waits for the confirm.
func (r *retryRig) publish(exchange, key, id string, attempt int, headers amqp091.Table) {
	h := amqp091.Table{"x-deduplication-header": fmt.Sprintf("%s#%d", id, attempt), "attempt": int32(attempt)}
	for k, v := range headers {
		h[k] = v
	}
	dc, err := r.ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false,
		amqp091.Publishing{MessageId: id, Headers: h, DeliveryMode: amqp091.Persistent})
	must(err)
	if !dc.Wait() {
		log.Fatal("nacked")
	}
}

// next waits (in real time: the broker routes on its own goroutines) for
// the next job.
func (r *retryRig) next() amqp091.Delivery {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		d, ok, err := r.ch.Get("jobs", false)
		must(err)
		if ok {
			return d
		}
	}
	log.Fatal("no job")
	return amqp091.Delivery{}
}

// handle is the consumer's work: it fails twice, then succeeds.
func handle(attempt int) error {
	if attempt < 2 {
		return fmt.Errorf("upstream unavailable")
	}
	return nil
}

var backoff = []time.Duration{time.Second, 30 * time.Second, 5 * time.Minute}

// Retry with backoff through a delayed exchange: a failed job is published
// again to "retry" (x-delayed-message) with x-delay set to the attempt's
// backoff; when due, "retry" routes it to "work" and the queue.
func Example_retryWithDelayedExchange() {
	r := newRetryRig()
	defer r.b.Close()
	must(r.ch.ExchangeDeclare("retry", "x-delayed-message", true, false, false, false,
		amqp091.Table{"x-delayed-type": "fanout"}))
	must(r.ch.ExchangeBind("work", "", "retry", false, nil))

	r.publish("work", "", "job-1", 0, nil)
	r.publish("work", "", "job-1", 0, nil) // the same send again: dropped
	for {
		d := r.next()
		attempt := int(d.Headers["attempt"].(int32))
		if err := handle(attempt); err != nil {
			wait := backoff[attempt]
			fmt.Printf("%s attempt %d: %v, retry in %s\n", d.MessageId, attempt, err, wait)
			r.publish("retry", "", d.MessageId, attempt+1, amqp091.Table{"x-delay": int64(wait / time.Millisecond)})
			must(d.Ack(false)) // after the retry is confirmed: never lost
			r.clk.Advance(wait)
			continue
		}
		fmt.Printf("%s attempt %d: done\n", d.MessageId, attempt)
		must(d.Ack(false))
		break
	}
	q, err := r.ch.QueueDeclarePassive("jobs", true, false, false, false, nil)
	must(err)
	fmt.Println("jobs left:", q.Messages)
	// Output:
	// job-1 attempt 0: upstream unavailable, retry in 1s
	// job-1 attempt 1: upstream unavailable, retry in 30s
	// job-1 attempt 2: done
	// jobs left: 0
}

// Retry with backoff through a chain of wait queues: one queue per backoff
// step, each with a message TTL and "work" as its dead-letter exchange; a
// failed job is published to the step's queue and dead-lettered back to
// "work" when its TTL ends. No plugin needed, and it works in a cluster.
func Example_retryWithTTLChain() {
	r := newRetryRig()
	defer r.b.Close()
	for _, wait := range backoff {
		_, err := r.ch.QueueDeclare(fmt.Sprintf("wait-%s", wait), true, false, false, false, amqp091.Table{
			"x-message-ttl":          int64(wait / time.Millisecond),
			"x-dead-letter-exchange": "work",
		})
		must(err)
	}

	r.publish("work", "", "job-2", 0, nil)
	r.publish("work", "", "job-2", 0, nil) // the same send again: dropped
	for {
		d := r.next()
		attempt := int(d.Headers["attempt"].(int32))
		if err := handle(attempt); err != nil {
			wait := backoff[attempt]
			fmt.Printf("%s attempt %d: %v, retry in %s\n", d.MessageId, attempt, err, wait)
			r.publish("", fmt.Sprintf("wait-%s", wait), d.MessageId, attempt+1, nil)
			must(d.Ack(false))
			// A message expires once its TTL has passed, strictly.
			r.clk.Advance(wait + time.Millisecond)
			continue
		}
		fmt.Printf("%s attempt %d: done\n", d.MessageId, attempt)
		must(d.Ack(false))
		break
	}
	q, err := r.ch.QueueDeclarePassive("jobs", true, false, false, false, nil)
	must(err)
	fmt.Println("jobs left:", q.Messages)
	// Output:
	// job-2 attempt 0: upstream unavailable, retry in 1s
	// job-2 attempt 1: upstream unavailable, retry in 30s
	// job-2 attempt 2: done
	// jobs left: 0
}
