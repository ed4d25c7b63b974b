package routing_test

import (
	"fmt"
	"slices"

	"github.com/warrenmq/broker/routing"
)

func Example() {
	t := routing.NewTable()
	t.DeclareDefaults()
	for _, q := range []string{"all-logs", "eu-errors", "unrouted"} {
		t.AddQueue(q)
	}
	_ = t.DeclareExchange(routing.Exchange{Name: "logs", Kind: routing.Topic, AlternateExchange: "amq.fanout"})
	for _, b := range []routing.Binding{
		{Source: "logs", Destination: routing.Destination{Name: "all-logs"}, Key: "log.#"},
		{Source: "logs", Destination: routing.Destination{Name: "eu-errors"}, Key: "log.eu.*.error"},
		{Source: "amq.fanout", Destination: routing.Destination{Name: "unrouted"}},
	} {
		if _, err := t.Bind(b); err != nil {
			fmt.Println(err)
		}
	}

	buf := make([]string, 0, 8)
	for _, key := range []string{"log.eu.db.error", "log.us.web.info", "metrics.cpu"} {
		queues := t.Route("logs", key, nil, buf[:0])
		slices.Sort(queues)
		fmt.Println(key, "->", queues)
	}
	fmt.Println(t.Route("", "eu-errors", nil, buf[:0]))
	// Output:
	// log.eu.db.error -> [all-logs eu-errors]
	// log.us.web.info -> [all-logs]
	// metrics.cpu -> [unrouted]
	// [eu-errors]
}
