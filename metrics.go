package broker

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenmq/broker/internal/metrics"
	"github.com/warrenmq/broker/meta"
)

// MetricsHandler returns an http.Handler that serves the broker's metrics
// in the Prometheus text exposition format (version 0.0.4), with
// RabbitMQ's rabbitmq_prometheus names where it has them: connection,
// channel, consumer, queue and exchange counts; message counters since
// start (published, routed, returned, confirmed, delivered, acknowledged,
// dead-lettered by reason); the queue gauges and counters summed over
// every queue; the resource alarms; the data directory's size on disk; a
// cluster member's raft state (warren_raft_*); the shovel links by state
// and what they moved (rabbitmq_shovel_dynamic, warren_shovel_*); and Go
// runtime basics.
// docs/metrics.md lists every family.
//
// A scrape reads the counts each queue published after its last step
// (one batch old at most, as RabbitMQ's sampled statistics are) and asks
// only the queues whose actors are running now for their memory, so it
// starts no idle queue's actor; it takes no lock that publishing or
// delivery waits on.
//
// MetricsHandler names no vhost, queue, user or connection: like
// rabbitmq_prometheus's /metrics (return_per_object_metrics = false, its
// default), it serves the queue metrics aggregated, so it may be left
// open to whoever scrapes. Options choose the per-object view and can
// require authentication. RabbitMQ's layout is /metrics aggregated and
// open, /metrics/per-object detailed:
//
//	mux.Handle("/metrics", b.MetricsHandler(broker.MetricsOptions{}))
//	mux.Handle("/metrics/per-object", b.MetricsHandler(broker.MetricsOptions{PerObject: true, Authenticate: true}))
func (b *Broker) MetricsHandler(o MetricsOptions) http.Handler {
	return metrics.Handler(metricsSource{b}, metrics.Options{PerObject: o.PerObject, Authenticate: o.Authenticate})
}

// MetricsOptions choose what MetricsHandler serves; the zero value is
// RabbitMQ's /metrics.
type MetricsOptions struct {
	// PerObject writes the queue metrics once per queue, labelled with
	// the vhost and queue names, as rabbitmq_prometheus's
	// /metrics/per-object does, instead of summed over every queue.
	// Whoever can scrape then learns every vhost and queue name: set
	// Authenticate too unless the port is reachable by operators only.
	PerObject bool
	// Authenticate requires HTTP basic auth with a user tagged
	// administrator or monitoring (the users the management API shows
	// every vhost to); others get 401. Users are Options.Users and those
	// added since, as for the management API, and failed logins are
	// throttled per source as AMQP logins are.
	Authenticate bool
}

// Collector returns a prometheus.Collector (client_golang) of the
// broker's metrics, so that a Go service serves them from the registry it
// already has:
//
//	reg.MustRegister(b.Collector(broker.CollectorOptions{}))
//
// It has MetricsHandler's families, names, labels and values (both are
// written from one list), less the Go runtime ones (go_* and
// process_start_time_seconds), which the host's own
// collectors.NewGoCollector and NewProcessCollector give and which would
// otherwise collide. Like MetricsHandler it sums the queue metrics and
// names no vhost or queue, and a Collect starts no idle queue's actor.
// The collector is unchecked (its Describe sends nothing): which families
// exist depends on the broker (a cluster member's warren_raft_*, a data
// directory's warren_store_disk_bytes). A Collect waits at most 10 s for
// a queue's answer.
func (b *Broker) Collector(o CollectorOptions) prometheus.Collector {
	return metrics.NewCollector(metricsSource{b}, o.PerObject)
}

// CollectorOptions choose what Collector collects; the zero value sums
// the queue metrics.
type CollectorOptions struct {
	// PerObject collects the queue metrics once per queue, labelled with
	// the vhost and queue names (as MetricsOptions.PerObject). Whoever
	// reads the host's registry then learns every vhost and queue name.
	PerObject bool
}

// metricsSource is the Broker as internal/metrics reads it.
type metricsSource struct{ b *Broker }

var _ metrics.Source = metricsSource{}

// Snapshot is metrics.Source's: Stats with the sampled queue details
// (sampledDetails), the alarms, the dead-lettering
// counters and the stores' state, in the metrics package's types.
func (m metricsSource) Snapshot(ctx context.Context) metrics.Snapshot {
	b := m.b
	st := b.stats(ctx, sampledDetails)
	alarms := b.alarmStatus()
	s := metrics.Snapshot{
		Connections: st.Connections, Channels: st.Channels, Consumers: st.Consumers,
		Queues: st.Queues, Exchanges: st.Exchanges,
		ConnectionsOpened: st.ConnectionsOpened, ConnectionsClosed: st.ConnectionsClosed,
		ChannelsOpened: st.ChannelsOpened, ChannelsClosed: st.ChannelsClosed,
		Totals:       metricsCounters(st.Totals),
		QueueDetails: make([]metrics.Queue, len(st.QueueDetails)),
		MemoryAlarm:  alarms.MemAlarm, DiskAlarm: alarms.DiskFreeAlarm,
		DataDir: b.opts.DataDir,
		Started: time.Unix(0, int64(b.incarnation)),
	}
	for i, q := range st.QueueDetails {
		s.QueueDetails[i] = metrics.Queue{
			VHost: q.VHost, Name: q.Name, Ready: q.Ready, Unacked: q.Unacked,
			Consumers: q.Consumers, Memory: q.Memory, Counters: metricsCounters(q.Counters),
		}
		if st := q.Stream; st != nil {
			s.QueueDetails[i].Stream = &metrics.Stream{FirstOffset: st.FirstOffset, LastOffset: st.LastOffset, Bytes: st.Bytes, Segments: st.Segments}
		}
	}
	for _, c := range b.counters.queues.DeadLettered.Load() {
		s.DeadLettered = append(s.DeadLettered, metrics.DeadLettered{Reason: c.Reason, DLX: c.DLX, N: c.N})
	}
	s.Shovels = b.shovelMetrics()
	if r, ok := b.stores.Meta.(meta.Replicated); ok {
		rs := r.ReplicationStatus()
		s.Replication = &rs
		s.QueueGroups = r.QueueReplications(ctx, "")
	}
	s.Federation = b.federationMetrics()
	return s
}

// Login is metrics.Source's: the HTTP basic-auth login.
func (m metricsSource) Login(ctx context.Context, peer net.Addr, user, password string) ([]string, error) {
	u, _, err := m.b.logins.Password(ctx, peer, user, password)
	return u.Tags, err
}

// metricsCounters is c in the metrics package's type.
func metricsCounters(c MessageCounters) metrics.Counters {
	return metrics.Counters{
		Published: c.Published, ReturnedUnroutable: c.ReturnedUnroutable,
		DroppedUnroutable: c.DroppedUnroutable, Confirmed: c.Confirmed, Enqueued: c.Enqueued,
		Delivered: c.Delivered, DeliveredNoAck: c.DeliveredNoAck, Got: c.Got, GotNoAck: c.GotNoAck,
		Redelivered: c.Redelivered, Acked: c.Acked,
	}
}
