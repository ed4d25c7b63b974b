package broker_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
)

// embeddedShards is a wrapper written the easy way: by embedding the
// interface. It forwards ShardStore's methods only.
type embeddedShards struct{ storage.ShardStore }

// syncingMeta is a meta store with an optional interface (meta.Syncer).
type syncingMeta struct{ *metamemory.Store }

func (syncingMeta) Sync(ctx context.Context) error { return ctx.Err() }

// embeddedMeta wraps a meta.Store by embedding it.
type embeddedMeta struct{ meta.Store }

// New refuses a given store that hides an optional interface of the
// store it embeds, naming it; the store made with Wrap keeps it and is
// accepted.
func TestNewNamesHiddenCapabilities(t *testing.T) {
	shards := memory.New()
	metaStore := syncingMeta{metamemory.New()}
	tests := []struct {
		name    string
		opts    broker.Options
		wantErr []string // nil: accepted
	}{
		{"shards by embedding", broker.Options{Storage: broker.StorageOptions{Shards: &embeddedShards{shards}}},
			[]string{"Options.Storage.Shards (*broker_test.embeddedShards) embeds a store that implements storage.MemoryReporter", "storage.Wrap"}},
		{"shards by Wrap", broker.Options{Storage: broker.StorageOptions{Shards: storage.Wrap(&embeddedShards{shards}, shards)}}, nil},
		{"meta by embedding", broker.Options{Storage: broker.StorageOptions{Meta: embeddedMeta{metaStore}}},
			[]string{"Options.Storage.Meta (broker_test.embeddedMeta) embeds a store that implements meta.Syncer", "meta.Wrap"}},
		{"meta by Wrap", broker.Options{Storage: broker.StorageOptions{Meta: meta.Wrap(embeddedMeta{metaStore}, metaStore)}}, nil},
		{"both at once", broker.Options{Storage: broker.StorageOptions{Shards: &embeddedShards{shards}, Meta: embeddedMeta{metaStore}}},
			[]string{"storage.MemoryReporter", "meta.Syncer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := broker.New(tt.opts)
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.NoError(t, b.Close())
				return
			}
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}
	wrapped := storage.Wrap(&embeddedShards{shards}, shards)
	_, ok := wrapped.(storage.MemoryReporter)
	require.True(t, ok, "Wrap keeps MemoryReporter")
	_, ok = wrapped.(storage.Syncer)
	require.False(t, ok, "Wrap adds nothing the inner store lacks")
}

// New reports every bad field in one error: the static ones and those
// checked against what the stores hold (a vhost named in
// Limits.VHostMaxConnections or a policy), given stores and DataDir alike.
func TestNewReportsEveryBadFieldAtOnce(t *testing.T) {
	stored := metamemory.New()
	require.NoError(t, stored.PutVHost(context.Background(), meta.VHost{Name: "kept"}))
	dataDir := t.TempDir()
	b, err := broker.New(broker.Options{DataDir: dataDir, VHosts: []string{"/", "kept"}})
	require.NoError(t, err)
	require.NoError(t, b.Close())

	bad := func(o broker.Options) broker.Options {
		o.Heartbeat = 1500 * time.Millisecond
		o.FrameMax = 10
		o.Limits.VHostMaxConnections = map[string]int{"nope": 1, "kept": 1}
		o.Policies = []broker.Policy{
			{VHost: "gone", Name: "p", Pattern: ".*", Definition: map[string]any{"max-length": 1}},
			{VHost: "/", Name: "bad", Pattern: ".*", Definition: map[string]any{"no-such-key": 1}},
		}
		return o
	}
	want := []string{
		"Options.Heartbeat 1.5s is not a whole number of seconds",
		"Options.FrameMax 10 is below the minimum",
		`Options.Limits.VHostMaxConnections["nope"]: no such vhost`,
		`Options.Policies[0] ("p"): no such vhost "gone"`,
		`Options.Policies[1] ("bad")`,
	}
	tests := []struct {
		name string
		opts broker.Options
	}{
		{"memory", bad(broker.Options{})},
		{"given meta store", bad(broker.Options{Storage: broker.StorageOptions{Meta: stored}})},
		{"data dir", bad(broker.Options{DataDir: dataDir})},
		{"fresh data dir", bad(broker.Options{DataDir: t.TempDir() + "/new"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := broker.New(tt.opts)
			require.Error(t, err)
			for _, w := range want {
				require.ErrorContains(t, err, w)
			}
			if tt.name == "memory" || tt.name == "fresh data dir" {
				require.ErrorContains(t, err, `Options.Limits.VHostMaxConnections["kept"]: no such vhost`)
			} else {
				require.NotContains(t, err.Error(), `"kept"`, "kept is stored")
			}
			require.Equal(t, len(want)+map[bool]int{true: 1}[strings.Contains(err.Error(), `["kept"]`)], strings.Count(err.Error(), "broker: Options."), err.Error())
		})
	}
	// A New that fails creates no DataDir: with static errors, or with
	// only a vhost the fresh store cannot have.
	_, err = broker.New(bad(broker.Options{DataDir: dataDir + "-never"}))
	require.Error(t, err)
	require.NoDirExists(t, dataDir+"-never")
	_, err = broker.New(broker.Options{DataDir: dataDir + "-never", Limits: broker.LimitOptions{VHostMaxConnections: map[string]int{"nope": 1}}})
	require.ErrorContains(t, err, `Options.Limits.VHostMaxConnections["nope"]: no such vhost`)
	require.NoDirExists(t, dataDir+"-never")
}

// lockedBuffer is a bytes.Buffer safe for the broker's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// New says, at Info, which optional interfaces the given stores lack and
// what the broker does instead; stores it opens itself are not listed.
func TestNewLogsLackingCapabilities(t *testing.T) {
	var logs lockedBuffer
	b, err := broker.New(broker.Options{Storage: broker.StorageOptions{Shards: memory.New()}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	out := logs.String()
	for _, name := range storage.Lacks(memory.New()) {
		require.Contains(t, out, "field=Options.Storage.Shards store=*memory.Store lacks="+name)
	}
	require.NotContains(t, out, "lacks=storage.MemoryReporter")
	require.NotContains(t, out, "field=Options.Storage.Meta", "Meta was not given")
}
