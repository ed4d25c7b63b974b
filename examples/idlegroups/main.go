// Command idlegroups declares many durable quorum queues over a
// cluster's members, queue i on member i modulo the members (so, under
// the client-local leader locator, each member leads its share), for
// scripts/idle-groups.sh's measurement of what idle queue groups cost.
// It prints how long the declarations took.
//
//	go run ./examples/idlegroups -urls amqp://guest:guest@127.0.0.1:5672/,amqp://... -queues 10000
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func main() {
	urls := flag.String("urls", "amqp://guest:guest@127.0.0.1:5672/", "the members' AMQP URLs, comma-separated")
	queues := flag.Int("queues", 10000, "quorum queues to declare")
	prefix := flag.String("prefix", "idle", "queue names are prefix-0 … prefix-(queues-1)")
	workers := flag.Int("workers", 4, "channels declaring at once on each member")
	flag.Parse()
	if err := run(strings.Split(*urls, ","), *queues, *prefix, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "idlegroups:", err)
		os.Exit(1)
	}
}

func run(urls []string, queues int, prefix string, workers int) error {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(urls)*workers)
	for m, url := range urls {
		conn, err := amqp091.Dial(url)
		if err != nil {
			return err
		}
		defer conn.Close()
		for w := range workers {
			ch, err := conn.Channel()
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Member m declares queues m, m+len(urls), …; its worker w
				// every workers-th of those.
				for i := m + w*len(urls); i < queues; i += len(urls) * workers {
					if _, err := ch.QueueDeclare(fmt.Sprintf("%s-%d", prefix, i), true, false, false, false,
						amqp091.Table{"x-queue-type": "quorum"}); err != nil {
						errs <- fmt.Errorf("declare %s-%d on %s: %w", prefix, i, url, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Printf("declared %d quorum queues over %d members in %v (%.0f/s)\n", queues, len(urls), d.Round(time.Millisecond), float64(queues)/d.Seconds())
	return nil
}
