package raft_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/metatest"
	"github.com/warrenmq/broker/meta/raft"
)

// TestReadsDataWrittenBefore starts a member on a copy of testdata/v1, the
// data directory of a one-member group an earlier version wrote
// (testdata/gen.go, at the commit testdata/README names): as it was, and
// with its state machine removed, so that this version applies every
// command of that version's log again. Either way every entity reads back
// as written, and the state holds the records that version's did.
func TestReadsDataWrittenBefore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		replay bool
	}{{"as-written", false}, {"log-replayed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "v1")
			require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/v1")))
			if tc.replay {
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "state")))
			}
			n := startOne(t, dir)
			metatest.CheckSample(t, n)
			require.NoError(t, n.Stop())
			require.Equal(t, metatest.SampleRecords(t, "testdata/records.txt"), stateMetadata(t, dir))
		})
	}
}

// TestWritesWhatItWroteBefore writes the sample into a new group: its
// state holds, byte for byte, the records the earlier version's did.
func TestWritesWhatItWroteBefore(t *testing.T) {
	dir := t.TempDir()
	n := startOne(t, dir)
	require.NoError(t, metatest.WriteSample(testCtx(t), n))
	require.NoError(t, n.Stop())
	require.Equal(t, metatest.SampleRecords(t, "testdata/records.txt"), stateMetadata(t, dir))
}

// startOne starts the only member of a group in dir and waits until it
// leads.
func startOne(t *testing.T, dir string) *raft.Node {
	t.Helper()
	net := raft.NewNetwork()
	t.Cleanup(net.Close)
	n, err := raft.Start(raft.Config{ID: 1, Dir: dir, Peers: []raft.Peer{{ID: 1}}, Transport: net.Transport(1)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	ctx := testCtx(t)
	require.NoError(t, n.Campaign(ctx))
	_, err = n.WaitLeader(ctx)
	require.NoError(t, err)
	return n
}

// stateMetadata returns the metadata records ('m' keys) of the stopped
// member's state in dir, in key order.
func stateMetadata(t *testing.T, dir string) []meta.Record {
	t.Helper()
	db, err := pebble.Open(filepath.Join(dir, "state"), &pebble.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	recs, err := metatest.Records(db)
	require.NoError(t, err)
	return recs
}
