package raft_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta/raft"
	"github.com/warrenmq/broker/storage"
)

// TestAddRemoveNode adds a fourth node through a configuration change (it
// receives the state from the leader), then removes one of the founders,
// and checks writes keep working and every member agrees on the peers.
func TestAddRemoveNode(t *testing.T) {
	c := newCluster(t, 3, 8)
	ctx := testCtx(t)
	lead := c.waitLeader(ctx)
	for i := range 20 {
		_, err := c.nodes[lead].Shards().Append(ctx, "q", []storage.Record{{Body: []byte{byte(i)}}})
		require.NoError(t, err)
	}

	p4 := raft.Peer{ID: 4, RaftAddr: "mem-4", AMQPAddr: "amqp-4"}
	n4, err := raft.Start(raft.Config{
		ID: 4, Dir: filepath.Join(t.TempDir(), "4"), Join: true, Transport: c.net.Transport(4),
		TickInterval: 25 * time.Millisecond, ElectionTicks: 40, HeartbeatTicks: 2, SnapshotEvery: 8,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n4.Stop()) })
	require.NoError(t, c.nodes[lead].AddNode(ctx, p4))
	require.Len(t, readAll(ctx, t, n4.Shards(), "q"), 20, "the new node catches up")
	want := append(append([]raft.Peer(nil), c.peers...), p4)
	got, err := n4.Peers(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Remove a founder that is not the leader; the rest go on.
	victim := (lead + 1) % 3
	require.NoError(t, c.nodes[lead].RemoveNode(ctx, c.nodes[victim].ID()))
	c.stop(victim)
	_, err = n4.Shards().Append(ctx, "q", []storage.Record{{Body: []byte("after")}})
	require.NoError(t, err)
	got, err = c.nodes[lead].Peers(ctx)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for _, p := range got {
		require.NotEqual(t, uint64(victim+1), p.ID)
	}
	require.Len(t, readAll(ctx, t, c.nodes[lead].Shards(), "q"), 21)
}

func TestConfigValidation(t *testing.T) {
	net := raft.NewNetwork()
	defer net.Close()
	tr := net.Transport(1)
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  raft.Config
	}{
		{"zero", raft.Config{}},
		{"no-id", raft.Config{Dir: dir, Transport: tr, Peers: []raft.Peer{{ID: 1}}}},
		{"no-dir", raft.Config{ID: 1, Transport: tr, Peers: []raft.Peer{{ID: 1}}}},
		{"no-transport", raft.Config{ID: 1, Dir: dir, Peers: []raft.Peer{{ID: 1}}}},
		{"self-missing", raft.Config{ID: 1, Dir: dir, Transport: tr, Peers: []raft.Peer{{ID: 2}}}},
		{"duplicate-peer", raft.Config{ID: 1, Dir: dir, Transport: tr, Peers: []raft.Peer{{ID: 1}, {ID: 1}}}},
		{"zero-peer", raft.Config{ID: 1, Dir: dir, Transport: tr, Peers: []raft.Peer{{ID: 1}, {ID: 0}}}},
		{"heartbeat-not-below-election", raft.Config{ID: 1, Dir: dir, Transport: tr, Peers: []raft.Peer{{ID: 1}},
			ElectionTicks: 2, HeartbeatTicks: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := raft.Start(tt.cfg)
			require.ErrorContains(t, err, "raft: ")
			require.Nil(t, n)
		})
	}
}
