package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/meta"
)

// Source is what the handler reads from the broker.
type Source interface {
	// Snapshot returns the broker's state for one scrape.
	Snapshot(ctx context.Context) Snapshot
	// Login checks HTTP basic credentials from peer and returns the
	// user's tags, or an error wrapping login.ErrRefused,
	// login.ErrUnavailable or login.ErrClosed. Only Options.Authenticate
	// calls it.
	Login(ctx context.Context, peer net.Addr, user, password string) (tags []string, err error)
}

// Snapshot is the broker's state at a scrape.
type Snapshot struct {
	Connections, Channels, Consumers, Queues, Exchanges int
	// ConnectionsOpened/Closed and ChannelsOpened/Closed count since the
	// broker started.
	ConnectionsOpened, ConnectionsClosed uint64
	ChannelsOpened, ChannelsClosed       uint64
	// Totals count message events since the broker started.
	Totals Counters
	// QueueDetails describes every queue.
	QueueDetails []Queue
	// DeadLettered counts dead-lettered messages by reason and whether the
	// queue had a dead-letter exchange, in the order they are written.
	DeadLettered []DeadLettered
	// MemoryAlarm and DiskAlarm are the resource alarms in effect.
	MemoryAlarm, DiskAlarm bool
	// DataDir is the broker's data directory, "" when it keeps nothing on
	// disk; the handler sums the sizes of its files.
	DataDir string
	// Replication is the raft status of a cluster member, nil otherwise.
	Replication *meta.ReplicationStatus
	// QueueGroups is the raft state of every queue with a group of its
	// own on a cluster member (meta.Replicated), nil otherwise.
	QueueGroups []meta.QueueReplication
	// Federation is the federation links running here (federation.go).
	Federation []FederationLink
	// Shovels are the shovel links this broker runs.
	Shovels []Shovel
	// Started is when the broker was created.
	Started time.Time
}

// Counters are message event counts (the broker's MessageCounters).
type Counters struct {
	Published, ReturnedUnroutable, DroppedUnroutable, Confirmed  uint64
	Enqueued                                                     uint64
	Delivered, DeliveredNoAck, Got, GotNoAck, Redelivered, Acked uint64
}

// Queue is one queue's state.
type Queue struct {
	VHost, Name    string
	Ready, Unacked uint64
	Consumers      int
	Memory         uint64 // estimated bytes held in memory
	Counters       Counters
	// Stream is a stream's log (x-queue-type stream); nil otherwise.
	Stream *Stream
}

// Stream is what a stream's log holds: its first and last offsets, the
// bytes counted toward retention and its segments.
type Stream struct {
	FirstOffset, LastOffset uint64
	Bytes                   int64
	Segments                int
}

// DeadLettered counts the messages dead-lettered for one reason
// ("expired", "rejected", "maxlen" or "delivery_limit"), by queues with a
// dead-letter exchange (DLX) or without.
type DeadLettered struct {
	Reason string
	DLX    bool
	N      uint64
}

// Options choose what Handler serves.
type Options struct {
	// PerObject writes the queue metrics once per queue, labelled with the
	// vhost and queue names, instead of summed over every queue.
	PerObject bool
	// Authenticate requires HTTP basic auth (Source.Login) with a user
	// tagged administrator or monitoring; others get 401.
	Authenticate bool
}

// Handler returns an http.Handler that serves src's metrics for GET and
// HEAD (405 otherwise):
//
//   - gauges: rabbitmq_connections, rabbitmq_channels, rabbitmq_consumers,
//     rabbitmq_queues, rabbitmq_exchanges, and summed over every queue (per
//     queue, labelled vhost and queue, with Options.PerObject)
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
//     alarm is in effect, else 0;
//   - warren_store_disk_bytes: the size of the files under the data
//     directory (only with one);
//   - for a cluster member (Snapshot.Replication): warren_raft_state
//     (label state: leader, follower, candidate, pre-candidate; 1 for this
//     member's), warren_raft_leader_id, warren_raft_term,
//     warren_raft_commit_index, warren_raft_applied_index (RabbitMQ's
//     rabbitmq_raft_* describe quorum queues, a different thing), and on
//     the leader, per member (label peer, the raft id)
//     warren_raft_peer_match_index, warren_raft_peer_next_index,
//     warren_raft_peer_recent_active and warren_raft_peer_state (label
//     state: probe, replicate, snapshot);
//   - for a cluster member's queue groups (Snapshot.QueueGroups), per
//     queue with per-object metrics, else summed over the queues as
//     RabbitMQ aggregates them: RabbitMQ's rabbitmq_raft_term_total and
//     rabbitmq_raft_log_commit_index (labels vhost, queue), and
//     warren_raft_queue_leader, 1 on the member leading the queue's group
//     (summed: how many groups this member leads);
//   - Go runtime basics: go_goroutines, go_threads, go_info,
//     go_memstats_*_bytes, go_gc_cycles_total, go_gc_pause_seconds_total,
//     process_start_time_seconds.
//
// With Options.Authenticate a request without the credentials of a user
// tagged administrator or monitoring gets 401 (503 when the user store
// does not answer), with RabbitMQ's management error body.
func Handler(src Source, o Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if o.Authenticate && !authorized(src, w, r) {
			return
		}
		var buf bytes.Buffer
		s := src.Snapshot(r.Context())
		Write(&buf, &s, o.PerObject)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(buf.Bytes())
	})
}

// authorized checks r's basic credentials against src and the tags that
// may see every vhost (administrator, monitoring); when they fail it
// answers r and reports false.
func authorized(src Source, w http.ResponseWriter, r *http.Request) bool {
	name, password, ok := r.BasicAuth()
	if !ok {
		loginFailed(w)
		return false
	}
	tags, err := src.Login(r.Context(), remoteAddr(r), name, password)
	switch {
	case errors.Is(err, login.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", "broker shutting down")
		return false
	case errors.Is(err, login.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", "cannot authenticate now: the user store did not answer; try again, or another cluster member")
		return false
	case err != nil:
		loginFailed(w)
		return false
	}
	if !slices.Contains(tags, "administrator") && !slices.Contains(tags, "monitoring") {
		writeError(w, http.StatusUnauthorized, "not_authorised", "Not monitoring user")
		return false
	}
	return true
}

// loginFailed answers a request whose credentials are missing or wrong,
// as RabbitMQ's management plugin does.
func loginFailed(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
	writeError(w, http.StatusUnauthorized, "not_authorized", "Login failed")
}

// writeError writes RabbitMQ's management error body.
func writeError(w http.ResponseWriter, status int, code, reason string) {
	body, _ := json.Marshal(map[string]string{"error": code, "reason": reason})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// remoteAddr is the request's peer for the login throttle; nil when
// RemoteAddr is not an address (an in-process caller), which is not
// throttled.
func remoteAddr(r *http.Request) net.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}
