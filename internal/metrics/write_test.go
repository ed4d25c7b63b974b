package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/metrics"
	"github.com/warrenmq/broker/internal/metrics/promtest"
	"github.com/warrenmq/broker/meta"
)

// fakeSource serves a fixed Snapshot and answers logins from a table.
type fakeSource struct {
	snap   metrics.Snapshot
	logins map[string]error    // user -> Login's error
	tags   map[string][]string // user -> tags
}

// Snapshot is metrics.Source's: the fixed snapshot.
func (f *fakeSource) Snapshot(context.Context) metrics.Snapshot { return f.snap }

// Login is metrics.Source's: the table's error for user, else its tags.
func (f *fakeSource) Login(_ context.Context, _ net.Addr, user, _ string) ([]string, error) {
	if err, ok := f.logins[user]; ok {
		return nil, err
	}
	return f.tags[user], nil
}

// TestWriteClusterMember: a cluster leader's raft state and its peers'
// replication, and the alarm gauges, come out as Handler documents them.
func TestWriteClusterMember(t *testing.T) {
	s := metrics.Snapshot{
		MemoryAlarm: true,
		Replication: &meta.ReplicationStatus{ID: 1, Role: "leader", Leader: 1, Term: 3, Commit: 40, Applied: 39, Peers: []meta.PeerStatus{
			{ID: 1, Match: 40, Next: 41, State: "replicate", RecentActive: true},
			{ID: 2, Match: 12, Next: 13, State: "probe"},
		}},
		Started: time.Unix(1_700_000_000, 500_000_000),
	}
	var buf bytes.Buffer
	metrics.Write(&buf, &s, false)
	fams, err := promtest.Parse(buf.String())
	require.NoError(t, err, "%s", buf.String())
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"rabbitmq_alarms_memory_used_watermark", "", 1},
		{"rabbitmq_alarms_free_disk_space_watermark", "", 0},
		{"warren_raft_state", `state="leader"`, 1},
		{"warren_raft_state", `state="follower"`, 0},
		{"warren_raft_leader_id", "", 1},
		{"warren_raft_term", "", 3},
		{"warren_raft_commit_index", "", 40},
		{"warren_raft_applied_index", "", 39},
		{"warren_raft_peer_match_index", `peer="2"`, 12},
		{"warren_raft_peer_next_index", `peer="1"`, 41},
		{"warren_raft_peer_recent_active", `peer="1"`, 1},
		{"warren_raft_peer_recent_active", `peer="2"`, 0},
		{"warren_raft_peer_state", `peer="2",state="probe"`, 1},
		{"warren_raft_peer_state", `peer="2",state="replicate"`, 0},
		{"process_start_time_seconds", "", 1_700_000_000.5},
	} {
		f, ok := fams[c.name]
		require.True(t, ok, c.name)
		require.Equal(t, c.want, f.Samples[c.labels], "%s{%s}", c.name, c.labels)
	}
	require.NotContains(t, fams, "warren_store_disk_bytes", "no data directory")
}

// TestHandlerAuthenticate: with Authenticate, the answer follows the
// login's outcome and the user's tags, and a refused request learns
// nothing about the broker.
func TestHandlerAuthenticate(t *testing.T) {
	src := &fakeSource{
		snap: metrics.Snapshot{QueueDetails: []metrics.Queue{{VHost: "/", Name: "secret"}}},
		logins: map[string]error{
			"wrong":  login.ErrRefused,
			"stuck":  fmt.Errorf("%w: no leader", login.ErrUnavailable),
			"closed": login.ErrClosed,
		},
		tags: map[string][]string{"mon": {"monitoring"}, "admin": {"administrator"}, "mgr": {"management"}},
	}
	srv := httptest.NewServer(metrics.Handler(src, metrics.Options{PerObject: true, Authenticate: true}))
	defer srv.Close()
	for _, tc := range []struct {
		user   string
		status int
	}{
		{"", http.StatusUnauthorized},
		{"wrong", http.StatusUnauthorized},
		{"stuck", http.StatusServiceUnavailable},
		{"closed", http.StatusServiceUnavailable},
		{"mgr", http.StatusUnauthorized},
		{"mon", http.StatusOK},
		{"admin", http.StatusOK},
	} {
		status, body := request(t, "GET", srv.URL+"/metrics", tc.user)
		require.Equal(t, tc.status, status, "user %q: %s", tc.user, body)
		if status == http.StatusOK {
			require.Contains(t, string(body), `queue="secret"`)
		} else {
			require.NotContains(t, string(body), "secret")
		}
	}
}

// BenchmarkScrape writes the per-object exposition of n queues.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("queues=%d", n), func(b *testing.B) {
			s := metrics.Snapshot{QueueDetails: make([]metrics.Queue, n)}
			for i := range s.QueueDetails {
				s.QueueDetails[i] = metrics.Queue{VHost: "/", Name: fmt.Sprintf("q%d", i), Ready: uint64(i)}
			}
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				metrics.Write(&buf, &s, true)
			}
			b.SetBytes(int64(buf.Len()))
		})
	}
}

// TestCollectMatchesWrite: for snapshots covering every family (a
// cluster leader with peers, streams, dead-lettering, a queue name with
// every escape), a registry holding the collector gathers what Write
// writes, less the Go runtime's families, aggregated and per object.
func TestCollectMatchesWrite(t *testing.T) {
	queues := []metrics.Queue{
		{VHost: "/", Name: "plain", Ready: 3, Unacked: 1, Consumers: 2, Memory: 4096,
			Counters: metrics.Counters{Enqueued: 9, Delivered: 5, Got: 1, Redelivered: 1, Acked: 4}},
		{VHost: "other", Name: "odd \"q\"\\\nname", Ready: 1},
		{VHost: "/", Name: "log", Stream: &metrics.Stream{FirstOffset: 10, LastOffset: 99, Bytes: 1 << 20, Segments: 2}},
	}
	for _, tc := range []struct {
		name string
		snap metrics.Snapshot
	}{
		{"empty", metrics.Snapshot{}},
		{"queues", metrics.Snapshot{
			Connections: 2, Channels: 3, Consumers: 2, Queues: 3, Exchanges: 7,
			ConnectionsOpened: 5, ConnectionsClosed: 3, ChannelsOpened: 6, ChannelsClosed: 3,
			Totals:       metrics.Counters{Published: 12, ReturnedUnroutable: 1, DroppedUnroutable: 1, Confirmed: 10, Delivered: 5, Acked: 4},
			QueueDetails: queues,
			DeadLettered: []metrics.DeadLettered{{Reason: "expired", DLX: true, N: 2}, {Reason: "expired", N: 1}, {Reason: "maxlen", N: 4}},
			DiskAlarm:    true,
		}},
		{"cluster leader", metrics.Snapshot{
			Queues: 1, QueueDetails: queues[:1],
			Replication: &meta.ReplicationStatus{ID: 1, Role: "leader", Leader: 1, Term: 3, Commit: 40, Applied: 39, Peers: []meta.PeerStatus{
				{ID: 1, Match: 40, Next: 41, State: "replicate", RecentActive: true},
				{ID: 2, Match: 12, Next: 13, State: "probe"},
			}},
		}},
		{"queue groups", metrics.Snapshot{QueueGroups: queueGroups}},
		{"data dir", metrics.Snapshot{DataDir: t.TempDir()}},
	} {
		for _, perObject := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/perObject=%v", tc.name, perObject), func(t *testing.T) {
				var buf bytes.Buffer
				metrics.Write(&buf, &tc.snap, perObject)
				reg := prometheus.NewRegistry()
				reg.MustRegister(metrics.NewCollector(&fakeSource{snap: tc.snap}, perObject))
				fams, err := promtest.Parse(buf.String())
				require.NoError(t, err)
				promtest.RequireGathers(t, reg, fams)
			})
		}
	}
}

// TestCollectInvalidUTF8: a queue name that is not UTF-8 (client_golang
// refuses such label values) is collected with replacement characters
// rather than failing the registry's whole Gather.
func TestCollectInvalidUTF8(t *testing.T) {
	snap := metrics.Snapshot{QueueDetails: []metrics.Queue{{VHost: "/", Name: "bad\xffname", Ready: 2}}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(&fakeSource{snap: snap}, true))
	fams, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, f := range fams {
		if f.GetName() != "rabbitmq_queue_messages_ready" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" {
					got = append(got, l.GetValue())
				}
			}
		}
	}
	require.Equal(t, []string{"bad\uFFFDname"}, got)
}

// BenchmarkCollect gathers the per-object metrics of n queues from a
// registry holding the collector (client_golang's Gather: sorting,
// consistency checks), to compare with BenchmarkScrape.
func BenchmarkCollect(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("queues=%d", n), func(b *testing.B) {
			s := metrics.Snapshot{QueueDetails: make([]metrics.Queue, n)}
			for i := range s.QueueDetails {
				s.QueueDetails[i] = metrics.Queue{VHost: "/", Name: fmt.Sprintf("q%d", i), Ready: uint64(i)}
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(metrics.NewCollector(&fakeSource{snap: s}, true))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var queueGroups = []meta.QueueReplication{
	{Queue: meta.QueueKey{VHost: "/", Name: "a"}, Leader: "warren@1", Leading: true, Term: 2, Commit: 10},
	{Queue: meta.QueueKey{VHost: "v", Name: "b"}, Leader: "warren@2", Term: 5, Commit: 7},
}

// TestWriteQueueGroups: each queue group's term, commit index and leader
// flag, per queue with per-object metrics, else summed.
func TestWriteQueueGroups(t *testing.T) {
	for _, tc := range []struct {
		perObject    bool
		name, labels string
		want         float64
	}{
		{true, "rabbitmq_raft_term_total", `queue="a",vhost="/"`, 2},
		{true, "rabbitmq_raft_log_commit_index", `queue="b",vhost="v"`, 7},
		{true, "warren_raft_queue_leader", `queue="a",vhost="/"`, 1},
		{true, "warren_raft_queue_leader", `queue="b",vhost="v"`, 0},
		{false, "rabbitmq_raft_term_total", "", 7},
		{false, "warren_raft_queue_leader", "", 1},
	} {
		var buf bytes.Buffer
		metrics.Write(&buf, &metrics.Snapshot{QueueGroups: queueGroups}, tc.perObject)
		fams, err := promtest.Parse(buf.String())
		require.NoError(t, err, "%s", buf.String())
		f, ok := fams[tc.name]
		require.True(t, ok, tc.name)
		require.Equal(t, tc.want, f.Samples[tc.labels], "%s{%s} perObject=%v: %v", tc.name, tc.labels, tc.perObject, f.Samples)
	}
}
