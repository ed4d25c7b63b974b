package metrics

// Shovel is one shovel link at a scrape (the broker's shovel supervisor's
// status).
type Shovel struct {
	VHost, Name string
	// State is "starting", "running" or "terminated".
	State     string
	Forwarded int64
	// Remaining is what src-delete-after still allows, -1 for never.
	Remaining int64
}

// shovelStates are the states rabbitmq_shovel_dynamic counts, each
// written even when no link is in it, so that a query for running
// shovels reads 0 rather than nothing.
var shovelStates = []string{"running", "starting", "terminated"}

// writeShovels writes the shovel families: rabbitmq_shovel_dynamic, the
// links by state, with the name and help of RabbitMQ 4.1's
// rabbitmq_shovel_prometheus (RabbitMQ 3.10 exports no shovel metric);
// and Warren's warren_shovel_messages_forwarded_total, summed over the
// links or, per object, one per link with warren_shovel_running and
// warren_shovel_messages_remaining (links with a src-delete-after
// count) beside it. Only the per-object view names a vhost or shovel.
func writeShovels(p sink, links []Shovel, perObject bool) {
	p.family("rabbitmq_shovel_dynamic", "gauge", "Number of dynamic shovels")
	for _, st := range shovelStates {
		n := 0
		for _, l := range links {
			if l.State == st {
				n++
			}
		}
		p.sample("rabbitmq_shovel_dynamic", float64(n), label("status", st))
	}
	const fwd = "warren_shovel_messages_forwarded_total"
	p.family(fwd, "counter", "Messages a shovel link moved (acknowledged at its source) since it last started.")
	if !perObject {
		var sum int64
		for _, l := range links {
			sum += l.Forwarded
		}
		p.sample(fwd, float64(sum), labels{})
		return
	}
	for _, l := range links {
		p.sample(fwd, float64(l.Forwarded), label2("vhost", l.VHost, "shovel", l.Name))
	}
	p.family("warren_shovel_running", "gauge", "1 if the shovel link is running (connected at both ends), 0 while it starts or reconnects.")
	for _, l := range links {
		p.sample("warren_shovel_running", boolGauge(l.State == "running"), label2("vhost", l.VHost, "shovel", l.Name))
	}
	p.family("warren_shovel_messages_remaining", "gauge", "Messages the shovel link moves before src-delete-after deletes it; links that never delete themselves are not listed.")
	for _, l := range links {
		if l.Remaining >= 0 {
			p.sample("warren_shovel_messages_remaining", float64(l.Remaining), label2("vhost", l.VHost, "shovel", l.Name))
		}
	}
}
