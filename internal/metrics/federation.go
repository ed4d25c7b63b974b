package metrics

// FederationLink is one federation link's state, for the federation
// families.
type FederationLink struct {
	VHost string
	// Link names it: "exchange:<name>:<upstream>" or
	// "queue:<name>:<upstream>".
	Link      string
	State     string // starting, running or error
	Forwarded int64
}

// federationStates are the link states warren_federation_links counts.
var federationStates = []string{"starting", "running", "error"}

// writeFederation writes the federation links' families: how many links
// are in each state, and per link whether it runs and how many messages
// it republished. RabbitMQ's rabbitmq_prometheus has no federation
// metrics; the names are Warren's. Nothing is written on a broker
// without links.
func writeFederation(p sink, links []FederationLink) {
	if len(links) == 0 {
		return
	}
	p.family("warren_federation_links", "gauge", "Federation links by state.")
	for _, st := range federationStates {
		n := 0
		for _, l := range links {
			if l.State == st {
				n++
			}
		}
		p.sample("warren_federation_links", float64(n), label("state", st))
	}
	p.family("warren_federation_link_running", "gauge", "1 if the federation link is running, 0 if it is starting or failed.")
	for _, l := range links {
		p.sample("warren_federation_link_running", boolGauge(l.State == "running"), label2("vhost", l.VHost, "link", l.Link))
	}
	p.family("warren_federation_messages_forwarded_total", "counter", "Messages a federation link republished here from its upstream.")
	for _, l := range links {
		p.sample("warren_federation_messages_forwarded_total", float64(l.Forwarded), label2("vhost", l.VHost, "link", l.Link))
	}
}
