package broker

import (
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/meta"
)

// MetricsHandler returns an http.Handler that serves the broker's metrics
// in the Prometheus text exposition format (version 0.0.4), written with
// the standard library. Names follow RabbitMQ's rabbitmq_prometheus plugin
// where it has one:
//
//   - gauges: rabbitmq_connections, rabbitmq_channels, rabbitmq_consumers,
//     rabbitmq_queues, and summed over every queue (per queue, labelled
//     vhost and queue, with MetricsOptions.PerObject)
//     rabbitmq_queue_messages_ready, rabbitmq_queue_messages_unacked,
//     rabbitmq_queue_consumers, rabbitmq_queue_process_memory_bytes;
//   - counters since start: rabbitmq_global_messages_received_total
//     (publishes), _routed_total, _unroutable_returned_total,
//     _unroutable_dropped_total, _confirmed_total, _delivered_total,
//     _delivered_consume_manual_ack_total, _delivered_consume_auto_ack_total,
//     _delivered_get_manual_ack_total, _delivered_get_auto_ack_total,
//     _redelivered_total, _acknowledged_total,
//     _dead_lettered_{expired,rejected,maxlen,delivery_limit}_total
//     (labels queue_type, dead_letter_strategy: at_most_once with a
//     dead-letter exchange, disabled without); summed (or per queue)
//     rabbitmq_queue_messages_published_total, _delivered_total,
//     _redelivered_total, _acknowledged_total;
//     rabbitmq_connections_opened_total, _closed_total,
//     rabbitmq_channels_opened_total, _closed_total;
//   - rabbitmq_alarms_memory_used_watermark and
//     rabbitmq_alarms_free_disk_space_watermark: 1 while that resource
//     alarm is in effect, else 0 (alarms.go);
//   - warren_store_disk_bytes: the Pebble database's size on disk (only
//     with a DataDir);
//   - with a replicated meta store (a cluster member, meta.Replicated):
//     warren_raft_state (label state: leader, follower, candidate,
//     pre-candidate; 1 for this member's), warren_raft_leader_id,
//     warren_raft_term, warren_raft_commit_index, warren_raft_applied_index
//     (RabbitMQ's rabbitmq_raft_* describe quorum queues, a different
//     thing), and on the leader, per member (label peer, the raft id)
//     warren_raft_peer_match_index, warren_raft_peer_next_index,
//     warren_raft_peer_recent_active and warren_raft_peer_state (label
//     state: probe, replicate, snapshot);
//   - Go runtime basics: go_goroutines, go_threads, go_info,
//     go_memstats_*_bytes, go_gc_cycles_total, go_gc_pause_seconds_total,
//     process_start_time_seconds.
//
// A scrape asks every queue actor for its counts, so it costs one round
// trip per queue; it takes no lock that publishing or delivery waits on.
//
// MetricsHandler names no vhost, queue, user or connection: like
// rabbitmq_prometheus's /metrics (return_per_object_metrics = false, its
// default), it serves the queue metrics aggregated, so it may be left
// open to whoever scrapes. MetricsHandlerWith serves the per-object view
// and can require authentication.
func (b *Broker) MetricsHandler() http.Handler { return b.MetricsHandlerWith(MetricsOptions{}) }

// MetricsOptions choose what MetricsHandlerWith serves.
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
	// added since, as for the management API.
	Authenticate bool
}

// MetricsHandlerWith is MetricsHandler with the choices of o. RabbitMQ's
// layout is /metrics aggregated and open, /metrics/per-object detailed:
//
//	mux.Handle("/metrics", b.MetricsHandler())
//	mux.Handle("/metrics/per-object", b.MetricsHandlerWith(broker.MetricsOptions{PerObject: true, Authenticate: true}))
func (b *Broker) MetricsHandlerWith(o MetricsOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if o.Authenticate {
			user, ok := mgmt.Authenticate(opsView{b}, w, r)
			if !ok {
				return
			}
			if !mgmt.HasTag(user, "administrator", "monitoring") {
				mgmt.WriteError(w, http.StatusUnauthorized, "not_authorised", "Not monitoring user")
				return
			}
		}
		var buf bytes.Buffer
		b.writeMetrics(&buf, o.PerObject)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(buf.Bytes())
	})
}

// promWriter writes metric families: HELP and TYPE once, then samples.
type promWriter struct{ buf *bytes.Buffer }

func (p promWriter) family(name, typ, help string) {
	fmt.Fprintf(p.buf, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

// sample writes one sample; labels alternate names and values.
func (p promWriter) sample(name string, value float64, labels ...string) {
	p.buf.WriteString(name)
	if len(labels) > 0 {
		p.buf.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				p.buf.WriteByte(',')
			}
			p.buf.WriteString(labels[i])
			p.buf.WriteString(`="`)
			p.buf.WriteString(escapeLabel(labels[i+1]))
			p.buf.WriteByte('"')
		}
		p.buf.WriteByte('}')
	}
	p.buf.WriteByte(' ')
	p.buf.WriteString(formatValue(value))
	p.buf.WriteByte('\n')
}

// one writes a family with a single unlabelled sample.
func (p promWriter) one(name, typ, help string, value float64) {
	p.family(name, typ, help)
	p.sample(name, value)
}

// escapeLabel escapes a label value: backslash, double quote and newline.
func boolGauge(on bool) float64 {
	if on {
		return 1
	}
	return 0
}

func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// escapeHelp escapes HELP text: backslash and newline.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// writeMetrics writes every family; the queue families per queue when
// perObject, else one unlabelled sum each.
func (b *Broker) writeMetrics(buf *bytes.Buffer, perObject bool) {
	p := promWriter{buf}
	s := b.Stats()
	gauge, counter := "gauge", "counter"
	p.one("rabbitmq_connections", gauge, "Open connections.", float64(s.Connections))
	p.one("rabbitmq_channels", gauge, "Open channels.", float64(s.Channels))
	p.one("rabbitmq_consumers", gauge, "Consumers.", float64(s.Consumers))
	p.one("rabbitmq_queues", gauge, "Queues.", float64(s.Queues))
	p.one("rabbitmq_exchanges", gauge, "Exchanges, the default and predeclared ones included.", float64(s.Exchanges))
	p.one("rabbitmq_connections_opened_total", counter, "Connections accepted since start.", float64(s.ConnectionsOpened))
	p.one("rabbitmq_connections_closed_total", counter, "Connections closed since start.", float64(s.ConnectionsClosed))
	p.one("rabbitmq_channels_opened_total", counter, "Channels opened since start.", float64(s.ChannelsOpened))
	p.one("rabbitmq_channels_closed_total", counter, "Channels closed since start.", float64(s.ChannelsClosed))
	alarms := b.alarmStatus()
	p.one("rabbitmq_alarms_memory_used_watermark", gauge, "1 if the memory alarm is in effect.", boolGauge(alarms.MemAlarm))
	p.one("rabbitmq_alarms_free_disk_space_watermark", gauge, "1 if the free disk space alarm is in effect.", boolGauge(alarms.DiskFreeAlarm))

	t := s.Totals
	routed := t.Published - min(t.Published, t.ReturnedUnroutable+t.DroppedUnroutable)
	for _, c := range []struct {
		name, help string
		v          uint64
	}{
		{"received", "Messages published (basic.publish received).", t.Published},
		{"routed", "Published messages routed to at least one queue.", routed},
		{"unroutable_returned", "Unroutable messages returned to a mandatory publisher.", t.ReturnedUnroutable},
		{"unroutable_dropped", "Unroutable messages dropped.", t.DroppedUnroutable},
		{"confirmed", "Publishes confirmed to confirm-mode publishers.", t.Confirmed},
		{"delivered", "Messages delivered to consumers and basic.get.", t.Delivered + t.DeliveredNoAck + t.Got + t.GotNoAck},
		{"delivered_consume_manual_ack", "Deliveries to consumers that acknowledge.", t.Delivered},
		{"delivered_consume_auto_ack", "Deliveries to no-ack consumers.", t.DeliveredNoAck},
		{"delivered_get_manual_ack", "basic.get answers that need an ack.", t.Got},
		{"delivered_get_auto_ack", "basic.get answers with no-ack.", t.GotNoAck},
		{"redelivered", "Deliveries with redelivered=true.", t.Redelivered},
		{"acknowledged", "Deliveries acknowledged by clients.", t.Acked},
	} {
		p.one("rabbitmq_global_messages_"+c.name+"_total", counter, c.help, float64(c.v))
	}
	b.writeDeadLettered(p)

	perQueue := []struct {
		name, typ, help string
		v               func(*QueueStats) float64
	}{
		{"rabbitmq_queue_messages_ready", gauge, "Messages ready for delivery.", func(q *QueueStats) float64 { return float64(q.Ready) }},
		{"rabbitmq_queue_messages_unacked", gauge, "Messages delivered and not yet acknowledged.", func(q *QueueStats) float64 { return float64(q.Unacked) }},
		{"rabbitmq_queue_consumers", gauge, "Consumers of the queue.", func(q *QueueStats) float64 { return float64(q.Consumers) }},
		{"rabbitmq_queue_process_memory_bytes", gauge, "Estimated bytes the queue holds in memory.", func(q *QueueStats) float64 { return float64(q.Memory) }},
		{"rabbitmq_queue_messages_published_total", counter, "Messages the queue took.", func(q *QueueStats) float64 { return float64(q.Counters.Enqueued) }},
		{"rabbitmq_queue_messages_delivered_total", counter, "Messages the queue delivered (consumers and basic.get).", func(q *QueueStats) float64 {
			c := q.Counters
			return float64(c.Delivered + c.DeliveredNoAck + c.Got + c.GotNoAck)
		}},
		{"rabbitmq_queue_messages_redelivered_total", counter, "Deliveries with redelivered=true.", func(q *QueueStats) float64 { return float64(q.Counters.Redelivered) }},
		{"rabbitmq_queue_messages_acknowledged_total", counter, "Deliveries acknowledged.", func(q *QueueStats) float64 { return float64(q.Counters.Acked) }},
	}
	for _, m := range perQueue {
		p.family(m.name, m.typ, m.help)
		if !perObject {
			var sum float64
			for i := range s.QueueDetails {
				sum += m.v(&s.QueueDetails[i])
			}
			p.sample(m.name, sum)
			continue
		}
		for i := range s.QueueDetails {
			q := &s.QueueDetails[i]
			p.sample(m.name, m.v(q), "vhost", q.VHost, "queue", q.Name)
		}
	}

	if dir := b.opts.DataDir; dir != "" {
		// Summed from the files, not asked of Pebble: a scrape racing
		// Close must not touch a closing database.
		p.one("warren_store_disk_bytes", gauge, "Bytes of the files under the data directory.", float64(dirSize(dir)))
	}

	if r, ok := b.stores.meta.(meta.Replicated); ok {
		writeRaft(p, r.ReplicationStatus())
	}

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.one("go_goroutines", gauge, "Goroutines that currently exist.", float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	p.one("go_threads", gauge, "OS threads created.", float64(threads))
	p.family("go_info", gauge, "Information about the Go environment.")
	p.sample("go_info", 1, "version", runtime.Version())
	p.one("go_memstats_alloc_bytes", gauge, "Bytes of allocated heap objects.", float64(ms.HeapAlloc))
	p.one("go_memstats_heap_inuse_bytes", gauge, "Bytes in in-use heap spans.", float64(ms.HeapInuse))
	p.one("go_memstats_sys_bytes", gauge, "Bytes obtained from the OS.", float64(ms.Sys))
	p.one("go_memstats_alloc_bytes_total", counter, "Bytes allocated for heap objects, cumulative.", float64(ms.TotalAlloc))
	p.one("go_gc_cycles_total", counter, "Completed GC cycles.", float64(ms.NumGC))
	p.one("go_gc_pause_seconds_total", counter, "Cumulative GC stop-the-world pause time.", time.Duration(ms.PauseTotalNs).Seconds())
	p.one("process_start_time_seconds", gauge, "When the broker was created, in Unix seconds.", float64(b.incarnation)/1e9)
}

// deadLetterHelp are rabbitmq_prometheus's descriptions of the
// dead-lettering counters (rabbit_global_counters).
var deadLetterHelp = map[string]string{
	queue.ReasonExpired:       "Total number of messages dead-lettered due to message TTL exceeded",
	queue.ReasonRejected:      "Total number of messages dead-lettered due to basic.reject or basic.nack",
	queue.ReasonMaxLen:        "Total number of messages dead-lettered due to overflow drop-head or reject-publish-dlx",
	queue.ReasonDeliveryLimit: "Total number of messages dead-lettered due to delivery-limit exceeded",
}

// writeDeadLettered writes RabbitMQ 3.10's dead-lettering counters:
// rabbitmq_global_messages_dead_lettered_<reason>_total with labels
// queue_type (Warren's queues are classic ones) and dead_letter_strategy
// (at_most_once with a dead-letter exchange, disabled without: dropped).
func (b *Broker) writeDeadLettered(p promWriter) {
	last := ""
	for _, c := range b.ops.queues.DeadLettered.Load() {
		name := "rabbitmq_global_messages_dead_lettered_" + c.Reason + "_total"
		if name != last {
			p.family(name, "counter", deadLetterHelp[c.Reason])
			last = name
		}
		strategy := "disabled"
		if c.DLX {
			strategy = "at_most_once"
		}
		p.sample(name, float64(c.N), "queue_type", "rabbit_classic_queue", "dead_letter_strategy", strategy)
	}
}

// dirSize adds up the sizes of the regular files under dir; files that
// vanish during the walk (compactions) are skipped.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	return n
}

// writeRaft writes the raft gauges of a cluster member (see MetricsHandler).
func writeRaft(p promWriter, s meta.ReplicationStatus) {
	gauge := "gauge"
	p.family("warren_raft_state", gauge, "1 for this member's raft role.")
	for _, r := range []string{"leader", "follower", "candidate", "pre-candidate"} {
		p.sample("warren_raft_state", boolGauge(s.Role == r), "state", r)
	}
	p.one("warren_raft_leader_id", gauge, "Raft id of the leader this member knows, 0 when none.", float64(s.Leader))
	p.one("warren_raft_term", gauge, "Current raft term.", float64(s.Term))
	p.one("warren_raft_commit_index", gauge, "Highest raft log index this member knows committed.", float64(s.Commit))
	p.one("warren_raft_applied_index", gauge, "Highest raft log index this member applied.", float64(s.Applied))
	peers := []struct {
		name, help string
		v          func(meta.PeerStatus) float64
	}{
		{"warren_raft_peer_match_index", "Leader only: highest log index known replicated on the member.", func(ps meta.PeerStatus) float64 { return float64(ps.Match) }},
		{"warren_raft_peer_next_index", "Leader only: next log index the leader sends the member.", func(ps meta.PeerStatus) float64 { return float64(ps.Next) }},
		{"warren_raft_peer_recent_active", "Leader only: 1 if the leader heard from the member within an election timeout.", func(ps meta.PeerStatus) float64 { return boolGauge(ps.RecentActive) }},
	}
	for _, m := range peers {
		p.family(m.name, gauge, m.help)
		for _, ps := range s.Peers {
			p.sample(m.name, m.v(ps), "peer", strconv.FormatUint(ps.ID, 10))
		}
	}
	p.family("warren_raft_peer_state", gauge, "Leader only: 1 for the member's replication state.")
	for _, ps := range s.Peers {
		for _, st := range []string{"probe", "replicate", "snapshot"} {
			p.sample("warren_raft_peer_state", boolGauge(ps.State == st), "peer", strconv.FormatUint(ps.ID, 10), "state", st)
		}
	}
}
