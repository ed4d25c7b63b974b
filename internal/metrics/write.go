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
	p := promWriter{buf}
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
	p.one("rabbitmq_alarms_memory_used_watermark", gauge, "1 if the memory alarm is in effect.", boolGauge(s.MemoryAlarm))
	p.one("rabbitmq_alarms_free_disk_space_watermark", gauge, "1 if the free disk space alarm is in effect.", boolGauge(s.DiskAlarm))

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
			p.sample(m.name, sum)
			continue
		}
		for i := range s.QueueDetails {
			q := &s.QueueDetails[i]
			p.sample(m.name, m.v(q), "vhost", q.VHost, "queue", q.Name)
		}
	}

	if perObject {
		writeStreams(p, s.QueueDetails)
	}

	if dir := s.DataDir; dir != "" {
		// Summed from the files, not asked of Pebble: a scrape racing
		// Close must not touch a closing database.
		p.one("warren_store_disk_bytes", gauge, "Bytes of the files under the data directory.", float64(dirSize(dir)))
	}

	if s.Replication != nil {
		writeRaft(p, *s.Replication)
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
	p.one("process_start_time_seconds", gauge, "When the broker was created, in Unix seconds.", float64(s.Started.UnixNano())/1e9)
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
func writeDeadLettered(p promWriter, counts []DeadLettered) {
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

// writeRaft writes the raft gauges of a cluster member (see Handler).
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
