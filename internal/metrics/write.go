package metrics

import (
	"bytes"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/broker/meta"
)

// sink receives the families emit produces: each family's HELP and
// TYPE once, then its samples. promWriter writes them as text for
// Handler; collectSink turns them into client_golang metrics for
// Collector. Both read the one list in emit, so the handler and the
// collector cannot drift apart.
type sink interface {
	family(name, typ, help string)
	sample(name string, value float64, l labels)
}

// labels are a sample's labels: at most two name/value pairs (no family
// has more), none when k1 is "". A struct rather than a variadic slice so
// that a sample through the sink interface allocates nothing.
type labels struct{ k1, v1, k2, v2 string }

// label is one pair; label2 two.
func label(k, v string) labels            { return labels{k1: k, v1: v} }
func label2(k1, v1, k2, v2 string) labels { return labels{k1, v1, k2, v2} }
func (l labels) names() []string          { return l.pick(l.k1, l.k2) }
func (l labels) values() []string         { return l.pick(l.v1, l.v2) }
func (l labels) pick(first, second string) []string {
	switch {
	case l.k1 == "":
		return nil
	case l.k2 == "":
		return []string{first}
	}
	return []string{first, second}
}

// promWriter writes metric families as text: HELP and TYPE once, then
// samples.
type promWriter struct{ buf *bytes.Buffer }

func (p promWriter) family(name, typ, help string) {
	fmt.Fprintf(p.buf, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

// sample writes one sample.
func (p promWriter) sample(name string, value float64, l labels) {
	p.buf.WriteString(name)
	if l.k1 != "" {
		p.buf.WriteByte('{')
		p.pair(l.k1, l.v1)
		if l.k2 != "" {
			p.buf.WriteByte(',')
			p.pair(l.k2, l.v2)
		}
		p.buf.WriteByte('}')
	}
	p.buf.WriteByte(' ')
	p.buf.WriteString(formatValue(value))
	p.buf.WriteByte('\n')
}

func (p promWriter) pair(k, v string) {
	p.buf.WriteString(k)
	p.buf.WriteString(`="`)
	p.buf.WriteString(escapeLabel(v))
	p.buf.WriteByte('"')
}

// one writes a family with a single unlabelled sample.
func one(p sink, name, typ, help string, value float64) {
	p.family(name, typ, help)
	p.sample(name, value, labels{})
}

// boolGauge is a gauge's value for a condition: 1 when it holds.
func boolGauge(on bool) float64 {
	if on {
		return 1
	}
	return 0
}

// escapeLabel escapes a label value: backslash, double quote and newline.
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

// formatValue writes a sample value as the format spells it.
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

// Write writes every family of s to buf (Handler lists them): the queue
// families per queue when perObject, else one unlabelled sum each.
func Write(buf *bytes.Buffer, s *Snapshot, perObject bool) {
	emit(promWriter{buf}, s, perObject, true)
}

// emit gives p every family of s (Handler lists them), the Go runtime's
// only when goRuntime is set.
func emit(p sink, s *Snapshot, perObject, goRuntime bool) {
	gauge, counter := "gauge", "counter"
	one(p, "rabbitmq_connections", gauge, "Open connections.", float64(s.Connections))
	one(p, "rabbitmq_channels", gauge, "Open channels.", float64(s.Channels))
	one(p, "rabbitmq_consumers", gauge, "Consumers.", float64(s.Consumers))
	one(p, "rabbitmq_queues", gauge, "Queues.", float64(s.Queues))
	one(p, "rabbitmq_exchanges", gauge, "Exchanges, the default and predeclared ones included.", float64(s.Exchanges))
	one(p, "rabbitmq_connections_opened_total", counter, "Connections accepted since start.", float64(s.ConnectionsOpened))
	one(p, "rabbitmq_connections_closed_total", counter, "Connections closed since start.", float64(s.ConnectionsClosed))
	one(p, "rabbitmq_channels_opened_total", counter, "Channels opened since start.", float64(s.ChannelsOpened))
	one(p, "rabbitmq_channels_closed_total", counter, "Channels closed since start.", float64(s.ChannelsClosed))
	one(p, "rabbitmq_alarms_memory_used_watermark", gauge, "1 if the memory alarm is in effect.", boolGauge(s.MemoryAlarm))
	one(p, "rabbitmq_alarms_free_disk_space_watermark", gauge, "1 if the free disk space alarm is in effect.", boolGauge(s.DiskAlarm))

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
		one(p, "rabbitmq_global_messages_"+c.name+"_total", counter, c.help, float64(c.v))
	}
	writeDeadLettered(p, s.DeadLettered)

	perQueue := []struct {
		name, typ, help string
		v               func(*Queue) float64
	}{
		{"rabbitmq_queue_messages_ready", gauge, "Messages ready for delivery.", func(q *Queue) float64 { return float64(q.Ready) }},
		{"rabbitmq_queue_messages_unacked", gauge, "Messages delivered and not yet acknowledged.", func(q *Queue) float64 { return float64(q.Unacked) }},
		{"rabbitmq_queue_consumers", gauge, "Consumers of the queue.", func(q *Queue) float64 { return float64(q.Consumers) }},
		{"rabbitmq_queue_process_memory_bytes", gauge, "Estimated bytes the queue holds in memory.", func(q *Queue) float64 { return float64(q.Memory) }},
		{"rabbitmq_queue_messages_published_total", counter, "Messages the queue took.", func(q *Queue) float64 { return float64(q.Counters.Enqueued) }},
		{"rabbitmq_queue_messages_delivered_total", counter, "Messages the queue delivered (consumers and basic.get).", func(q *Queue) float64 {
			c := q.Counters
			return float64(c.Delivered + c.DeliveredNoAck + c.Got + c.GotNoAck)
		}},
		{"rabbitmq_queue_messages_redelivered_total", counter, "Deliveries with redelivered=true.", func(q *Queue) float64 { return float64(q.Counters.Redelivered) }},
		{"rabbitmq_queue_messages_acknowledged_total", counter, "Deliveries acknowledged.", func(q *Queue) float64 { return float64(q.Counters.Acked) }},
	}
	for _, m := range perQueue {
		p.family(m.name, m.typ, m.help)
		if !perObject {
			var sum float64
			for i := range s.QueueDetails {
				sum += m.v(&s.QueueDetails[i])
			}
			p.sample(m.name, sum, labels{})
			continue
		}
		for i := range s.QueueDetails {
			q := &s.QueueDetails[i]
			p.sample(m.name, m.v(q), label2("vhost", q.VHost, "queue", q.Name))
		}
	}

	if perObject {
		writeStreams(p, s.QueueDetails)
	}

	if dir := s.DataDir; dir != "" {
		// Summed from the files, not asked of Pebble: a scrape racing
		// Close must not touch a closing database.
		one(p, "warren_store_disk_bytes", gauge, "Bytes of the files under the data directory.", float64(dirSize(dir)))
	}

	if s.Replication != nil {
		writeRaft(p, *s.Replication)
	}
	if s.QueueGroups != nil {
		writeQueueGroups(p, s.QueueGroups, perObject)
	}
	writeFederation(p, s.Federation)

	writeShovels(p, s.Shovels, perObject)

	if !goRuntime {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	one(p, "go_goroutines", gauge, "Goroutines that currently exist.", float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	one(p, "go_threads", gauge, "OS threads created.", float64(threads))
	p.family("go_info", gauge, "Information about the Go environment.")
	p.sample("go_info", 1, label("version", runtime.Version()))
	one(p, "go_memstats_alloc_bytes", gauge, "Bytes of allocated heap objects.", float64(ms.HeapAlloc))
	one(p, "go_memstats_heap_inuse_bytes", gauge, "Bytes in in-use heap spans.", float64(ms.HeapInuse))
	one(p, "go_memstats_sys_bytes", gauge, "Bytes obtained from the OS.", float64(ms.Sys))
	one(p, "go_memstats_alloc_bytes_total", counter, "Bytes allocated for heap objects, cumulative.", float64(ms.TotalAlloc))
	one(p, "go_gc_cycles_total", counter, "Completed GC cycles.", float64(ms.NumGC))
	one(p, "go_gc_pause_seconds_total", counter, "Cumulative GC stop-the-world pause time.", time.Duration(ms.PauseTotalNs).Seconds())
	one(p, "process_start_time_seconds", gauge, "When the broker was created, in Unix seconds.", float64(s.Started.UnixNano())/1e9)
}

// deadLetterHelp are rabbitmq_prometheus's descriptions of the
// dead-lettering counters (rabbit_global_counters), by reason.
var deadLetterHelp = map[string]string{
	"expired":        "Total number of messages dead-lettered due to message TTL exceeded",
	"rejected":       "Total number of messages dead-lettered due to basic.reject or basic.nack",
	"maxlen":         "Total number of messages dead-lettered due to overflow drop-head or reject-publish-dlx",
	"delivery_limit": "Total number of messages dead-lettered due to delivery-limit exceeded",
}

// writeDeadLettered writes RabbitMQ 3.10's dead-lettering counters:
// rabbitmq_global_messages_dead_lettered_<reason>_total with labels
// queue_type (Warren's queues are classic ones) and dead_letter_strategy
// (at_most_once with a dead-letter exchange, disabled without: dropped).
// The counts of one reason must be adjacent.
func writeDeadLettered(p sink, counts []DeadLettered) {
	last := ""
	for _, c := range counts {
		name := "rabbitmq_global_messages_dead_lettered_" + c.Reason + "_total"
		if name != last {
			p.family(name, "counter", deadLetterHelp[c.Reason])
			last = name
		}
		strategy := "disabled"
		if c.DLX {
			strategy = "at_most_once"
		}
		p.sample(name, float64(c.N), label2("queue_type", "rabbit_classic_queue", "dead_letter_strategy", strategy))
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

// writeRaft writes the raft gauges of a cluster member (see Handler).
func writeRaft(p sink, s meta.ReplicationStatus) {
	gauge := "gauge"
	p.family("warren_raft_state", gauge, "1 for this member's raft role.")
	for _, r := range []string{"leader", "follower", "candidate", "pre-candidate"} {
		p.sample("warren_raft_state", boolGauge(s.Role == r), label("state", r))
	}
	one(p, "warren_raft_leader_id", gauge, "Raft id of the leader this member knows, 0 when none.", float64(s.Leader))
	one(p, "warren_raft_term", gauge, "Current raft term.", float64(s.Term))
	one(p, "warren_raft_commit_index", gauge, "Highest raft log index this member knows committed.", float64(s.Commit))
	one(p, "warren_raft_applied_index", gauge, "Highest raft log index this member applied.", float64(s.Applied))
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
			p.sample(m.name, m.v(ps), label("peer", strconv.FormatUint(ps.ID, 10)))
		}
	}
	p.family("warren_raft_peer_state", gauge, "Leader only: 1 for the member's replication state.")
	for _, ps := range s.Peers {
		for _, st := range []string{"probe", "replicate", "snapshot"} {
			p.sample("warren_raft_peer_state", boolGauge(ps.State == st), label2("peer", strconv.FormatUint(ps.ID, 10), "state", st))
		}
	}
}

// writeQueueGroups writes the queue groups' raft gauges (see Handler).
func writeQueueGroups(p sink, gs []meta.QueueReplication, perObject bool) {
	for _, m := range []struct {
		name, typ, help string
		v               func(meta.QueueReplication) float64
	}{
		{"rabbitmq_raft_term_total", "counter", "Current raft term of the queue's group.", func(g meta.QueueReplication) float64 { return float64(g.Term) }},
		{"rabbitmq_raft_log_commit_index", "gauge", "Highest log index of the queue's group this member knows committed.", func(g meta.QueueReplication) float64 { return float64(g.Commit) }},
		{"warren_raft_queue_leader", "gauge", "1 if this member leads the queue's group.", func(g meta.QueueReplication) float64 { return boolGauge(g.Leading) }},
	} {
		p.family(m.name, m.typ, m.help)
		if !perObject {
			var sum float64
			for _, g := range gs {
				sum += m.v(g)
			}
			p.sample(m.name, sum, labels{})
			continue
		}
		for _, g := range gs {
			p.sample(m.name, m.v(g), label2("vhost", g.Queue.VHost, "queue", g.Queue.Name))
		}
	}
}
