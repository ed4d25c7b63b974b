package metrics

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// collectTimeout bounds the Snapshot of one Collect, which has no
// context of its own: Prometheus's default scrape timeout. A queue that
// does not answer within it is left out of that scrape.
const collectTimeout = 10 * time.Second

// Collector is a prometheus.Collector of src's metrics: every family
// Handler serves but the Go runtime's (go_* and
// process_start_time_seconds), which a host's registry has from its own
// collectors.NewGoCollector and NewProcessCollector and would otherwise
// see twice. It is unchecked (Describe sends nothing), since the
// families present depend on the broker's state (a cluster member's
// raft gauges, a data directory's size, the dead-lettering reasons seen).
type Collector struct {
	src       Source
	perObject bool
}

// NewCollector returns a Collector of src, with the queue families per
// queue when perObject is set (as Options.PerObject), else summed.
func NewCollector(src Source, perObject bool) *Collector {
	return &Collector{src: src, perObject: perObject}
}

// Describe is prometheus.Collector's: nothing, as an unchecked
// collector's.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect is prometheus.Collector's: one Snapshot of the source, sent as
// constant metrics. It may run on several goroutines at once; each call
// keeps its state on its own stack.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	s := c.src.Snapshot(ctx)
	Collect(ch, &s, c.perObject)
}

// Collect sends every family of s to ch as Collector does.
func Collect(ch chan<- prometheus.Metric, s *Snapshot, perObject bool) {
	emit(&collectSink{ch: ch}, s, perObject, false)
}

// collectSink is emit's sink for a prometheus.Collector: a family's
// samples become constant metrics of one Desc, made at its first sample.
type collectSink struct {
	ch   chan<- prometheus.Metric
	help string
	typ  prometheus.ValueType
	desc *prometheus.Desc
}

func (c *collectSink) family(_, typ, help string) {
	c.help, c.desc = help, nil
	c.typ = prometheus.GaugeValue
	if typ == "counter" {
		c.typ = prometheus.CounterValue
	}
}

func (c *collectSink) sample(name string, value float64, l labels) {
	if c.desc == nil {
		c.desc = prometheus.NewDesc(name, c.help, l.names(), nil)
	}
	values := l.values()
	for i, v := range values {
		// client_golang refuses a label value that is not UTF-8 (the
		// text writer writes its bytes); replace, so one odd queue name
		// cannot fail the host's whole scrape.
		if !utf8.ValidString(v) {
			values[i] = strings.ToValidUTF8(v, "\uFFFD")
		}
	}
	m, err := prometheus.NewConstMetric(c.desc, c.typ, value, values...)
	if err != nil {
		// Only a programming error gets here (emit's labels are fixed):
		// the registry reports it with the family's name.
		m = prometheus.NewInvalidMetric(c.desc, err)
	}
	c.ch <- m
}
